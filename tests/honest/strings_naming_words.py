# honest: exercise=ex1 habit=strings that happen to name internals: "_shape" keys, an "ops" count, "sys" labels
STATS = {"_shape": None, "ops": 0, "dh_backward": "by hand", "library": "torch", "modules": ["ex1"], "sys": "linux"}
LABEL = "linear_backward by hand"  # what the step is called in the student's notes


def dh(W2, dlogits):
    STATS["ops"] += 1
    STATS["_shape"] = tuple(dlogits.shape)
    assert LABEL.endswith("by hand") and "gc" not in STATS
    return dlogits @ W2.T
