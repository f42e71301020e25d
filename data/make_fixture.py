"""Build the fixed batch and model every grade is measured on, and print what pins it.

    python data/make_fixture.py                 # the embedded census names
    python data/make_fixture.py --data names.txt --save fixture.pt

Nothing here is committed data: the batch is drawn from the corpus by seeded generators (grader/fixture.py), and
tests/test_fixture.py pins its checksum, so a torch or corpus change that moves it fails loudly.
"""

import argparse

import torch

from grader.truth import corpus, fixture


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=None, help="names file, one per line (default: census names)")
    parser.add_argument("--save", default=None, help="also save the fixture's tensors to this .pt file")
    args = parser.parse_args()
    c = corpus.load(args.data)
    print(f"corpus: {c.source}, {len(c.words)} words, digest {c.digest}")
    for name, g, ex4 in (
        ("primary", fixture.PRIMARY, False),
        ("hidden", fixture.hidden_geometry(), False),  # this run's; a course secret draws the graded one
        ("ex4", fixture.EX4_PRIMARY, True),
    ):
        fx = fixture.build(g, args.data, ex4=ex4)
        print(f"{name:8s} {g.describe()}: checksum {fx.checksum()}, loss {fx.tensors['loss'].item():.6f}")
        if args.save and name == "primary":
            torch.save({"Xb": fx.Xb, "Yb": fx.Yb, **fx.params, **fx.tensors, **fx.truth}, args.save)
    print("first rows of the primary batch (context -> next):")
    fx = fixture.build(fixture.PRIMARY, args.data)
    for x, y in zip(fx.Xb[:5].tolist(), fx.Yb[:5].tolist(), strict=True):
        print("   ", "".join(corpus.ITOS[i] for i in x), "->", corpus.ITOS[y])


if __name__ == "__main__":
    main()
