# expect: exercise=ex2 item=ex2.dlogits status=error message=import of 'reference.ex2' is blocked
from reference.ex2 import dlogits  # noqa: F401
