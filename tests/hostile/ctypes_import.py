# expect: exercise=ex2 item=ex2.dlogits status=error message=import of 'ctypes' is blocked
import ctypes  # noqa: F401
