"""The names of the model's variables and parameters, apart from torch: reading a submission needs no model."""

# Backprop order of Ex1: every variable whose gradient a student derives by hand.
EX1_ORDER = (
    "logprobs probs counts_sum_inv counts_sum counts norm_logits logit_maxes logits h W2 b2 hpreact "
    "bngain bnbias bnraw bnvar_inv bnvar bndiff2 bndiff bnmeani hprebn embcat W1 b1 emb C"
).split()
FORWARD_NAMES = (
    "emb embcat hprebn bnmeani bndiff bndiff2 bnvar bnvar_inv bnraw hpreact "
    "h logits logit_maxes norm_logits counts counts_sum counts_sum_inv probs logprobs loss"
).split()
PARAM_NAMES = ("C", "W1", "b1", "W2", "b2", "bngain", "bnbias")
EX4_FORWARD_NAMES = "emb embcat hprebn bnmean bnvar bnvar_inv bnraw hpreact h logits loss".split()
EX4_GRADS = tuple("d" + p for p in PARAM_NAMES)
