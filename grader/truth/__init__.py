"""The truth: the seeded model and batch, the names corpus, and the server that builds autograd's gradients."""
