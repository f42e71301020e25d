# honest: exercise=ex3 habit=a Windows file: CRLF line ends, a UTF-8 byte order mark, tabs for indentation
# honest-file: whole crlf bom
"""Exercise 3, written in Notepad."""

import torch
import torch.nn.functional as F


def dhprebn(dhpreact, bngain, bnvar_inv, bnraw, n):
	s1 = dhpreact.sum(0)
	s2 = (dhpreact * bnraw).sum(0)
	if n > 1:
		return bngain * bnvar_inv / n * (n * dhpreact - s1 - n / (n - 1) * bnraw * s2)
	return None
