# expect: exercise=ex1 item=ex1.dlogprobs status=error message=residue: none
# scan: evaded
# Look through every live object for another student's source text or answers.
import torch


def dlogprobs(logprobs):
    gc = torch.sys.modules["gc"]
    marker = "-".join(("CALM", "STUDENT", "PRIVATE", "MARKER"))  # built at run time: no constant holds it
    found = 0
    for obj in gc.get_objects():
        try:
            text = (
                obj
                if isinstance(obj, (str, bytes))
                else " ".join(map(str, obj))
                if isinstance(obj, (list, tuple))
                else ""
            )
        except Exception:
            continue
        if marker in str(text):
            found += 1
    raise RuntimeError(f"residue: {'none' if not found else found}")
