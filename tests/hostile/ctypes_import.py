# expect: exercise=ex2 item=ex2.dlogits status=error message=import of 'ctypes' is blocked
# scan: evaded
import ctypes  # noqa: F401
