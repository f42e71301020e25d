# expect: exercise=ex1 item=ex1.dhpreact status=error message=leaked: nothing
# scan: evaded
# A course at level diagnose shows students no formula; but every sandbox child holds grader.grading.traps with the
# hint and full texts (the Gradescope autograder ships traps.py uncut), and str.format's C field paths
# ("{0.sys.modules[grader.grading.traps]...}") read attributes and keys that string.Formatter's guard never sees and that
# no flagged token names. Raised, the formulas reach the student's own message at level diagnose.
import torch  # noqa: E402

FIELDS = ("TRAPS[tanh-preact].explain", "TRAPS[bessel].hint", "TRAPS[dhprebn-one-path].explain")


def dhpreact(h, dh):
    texts = []
    for field in FIELDS:
        try:
            texts.append(("{0.sys.modules[grader.grading.traps]." + field + "}").format(torch))
        except Exception:  # noqa: BLE001 - not there: nothing leaked
            pass
    raise RuntimeError("leaked: " + (" | ".join(t for t in texts if t.strip()) or "nothing"))
