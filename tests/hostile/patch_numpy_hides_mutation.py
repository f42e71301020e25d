# expect: exercise=ex4 item=ex4.dC status=failed message=mutates-input
# Change an input in place, and replace torch.Tensor.numpy so that the input's bytes read as they were before:
# the child digests its inputs after the call through torch's own C methods, which no code can replace.
import torch

_real_numpy = torch.Tensor.numpy
_stash = {}


def _numpy(self, *args, **kwargs):
    kept = _stash.get(self.data_ptr())
    return kept if kept is not None else _real_numpy(self, *args, **kwargs)


_reference_backward = backward  # noqa: F821 - the reference's, defined above in the same file


def backward(Xb, Yb, n, C, W1, W2, bngain, emb, embcat, bnraw, bnvar_inv, h, logits):
    grads = _reference_backward(Xb, Yb, n, C, W1, W2, bngain, emb, embcat, bnraw, bnvar_inv, h, logits)
    _stash[logits.data_ptr()] = _real_numpy(logits.clone())
    torch.Tensor.numpy = _numpy
    logits.zero_()
    return grads
