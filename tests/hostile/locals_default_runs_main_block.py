# expect: exercise=ex1 item=ex1.dW2 status=any flag=private_internals
# A default is evaluated where its def stands: at module level, locals() there is the module's globals, so a
# computed key sets __name__ and the __main__ block (whose reaches are otherwise unflagged) runs. (Found by a
# reviewing helper while locals() inside a def was being exempted; the default is not inside.) The locals() is
# flagged, and the block does not run: the child compiles its test as False (grader/sandbox/mainblock.py).
import torch


def _mark(d=locals()):
    d["_" * 2 + "name" + "_" * 2] = "_" * 2 + "main" + "_" * 2


_mark()
if __name__ == "__main__":
    seen = repr(torch._C._get_tracing_state)

    def dW2(h, dlogits):
        raise RuntimeError("the __main__ block ran: " + seen)
