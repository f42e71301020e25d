# expect: exercise=ex4 item=ex4.dC status=error message=import of 'os' is blocked
import os  # noqa: F401
