"""Inside a sandbox child: take every input from the parent, run the student's code, send back plain tensors.

A child holds one exercise file. It inherits no answers: every true gradient in its copy of memory is zeroed
before anything else happens, and every input of a call (forward tensors, parameters, upstream gradients)
arrives fresh over the pipe. After a call it sends back what the function returned and every tensor input as it
is now, so the parent, not the child, decides whether an input was changed in place.
"""

from __future__ import annotations

import builtins
import functools
import gc
import inspect
import linecache
import os
import re
import signal
import string
import sys
import traceback
import types
import typing
import warnings

import torch
import torch.autograd.forward_ad
import torch.autograd.functional
import torch.func
import torch.nn.functional  # noqa: F401  (imported before the jail closes)
import torch.testing
import torch.testing._comparison

from grader.sandbox import arena, forget, jail, mainblock, wire
from grader.sandbox.standins import STAND_INS, missing, stand_in

# Modules a submission may import; each is imported by warm_up (import_allowed), before a child's jail goes up.
ALLOWED_IMPORTS = (
    "torch",
    "torch.nn",
    "torch.nn.functional",
    "torch.autograd",
    "torch.func",
    "torch.linalg",
    "torch.special",
    "math",
    "cmath",
    "numpy",
    "functools",
    "itertools",
    "collections",
    "collections.abc",
    "operator",
    "typing",
    "dataclasses",
    "random",
    "string",
    "statistics",
    "fractions",
    "numbers",
    "enum",
    "abc",
    "time",
    "logging",
    "warnings",
    "copy",
    "pprint",
    "__future__",
)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # a child cannot start threads: OpenBLAS would spin waiting


def allowed_imports() -> list[str]:
    """Return what a submission may import, as a student reads it: the modules, then each stand-in's names."""
    modules = [n for n in ALLOWED_IMPORTS if n != "__future__"]
    return modules + [f"{m} ({', '.join(sorted(names))})" for m, names in STAND_INS.items()]


def import_allowed() -> None:
    """Import every module a submission may import (warm_up does, before a child's file system goes away)."""
    for name in ALLOWED_IMPORTS:
        try:
            __import__(name)
        except ImportError:  # numpy is optional
            pass


_is_grad_enabled = torch._C.is_grad_enabled  # kept before any student code can replace the public one
# Every autograd graph node takes the next number of this (thread-local) counter, whichever route built it:
# torch.ops.aten.set_grad_enabled / requires_grad_ / grad reach the engine past every Python tripwire.
# Grad mode is off for the child's whole life, so the counter may not move while student code runs.
_sequence_nr = torch._C._autograd._get_sequence_nr
_SEQUENCE = [_sequence_nr()]


class AutogradForbidden(RuntimeError):
    """Raised in a child when student code reaches for autograd."""


class BlockedImport(ImportError):
    """Raised in a child when student code imports something outside the allow-list."""


_AUTOGRAD_CALLS: list[str] = []
_IN_STUDENT = [False]  # True once the child is armed: from then on only student code and its results run there
_REAL_SET_GRAD = [torch._C._set_grad_enabled]


def _tripwire(name: str):
    def tripped(*args, **kwargs):
        _AUTOGRAD_CALLS.append(name)
        raise AutogradForbidden(f"{name} is autograd; this exercise is to derive the gradient by hand")

    return tripped


class _Tripped:
    """Stands in for an autograd object: any attribute or call records the use and refuses."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr):
        return _tripwire(f"{self._name}.{attr}")

    def __call__(self, *args, **kwargs):
        return _tripwire(self._name)()


_KERNEL_HOOKS: list = []  # the torch.library.Library that holds the hooks: they live as long as it does


def hook_backward_kernels() -> int:
    """Route each of torch's backward kernels (aten's *_backward*) through a check, once per process; return how many.

    `_log_softmax_backward_data`, `tanh_backward`, `native_batch_norm_backward` ... are autograd's own formulas:
    reached through torch.ops, torch._C or a name built at run time, they give a gradient nobody derived. Each is
    given a Python kernel at the autograd dispatch key, which every call passes (inference mode aside: arm()
    turns that into no_grad). In an armed child it refuses, as a tripwire; elsewhere (the grader's own autograd:
    the engine calls these kernels too) it hands the call on below autograd, unchanged. Registered before the
    children fork, it costs a child nothing, and no other op is slowed.
    """
    if _KERNEL_HOOKS:
        return 0
    library = torch.library.Library("aten", "IMPL")
    _KERNEL_HOOKS.append(library)
    names = sorted(n[6:] for n in torch._C._dispatch_get_all_op_names() if n.startswith("aten::") and "backward" in n)
    hooked = 0
    with warnings.catch_warnings():  # "overriding a previously registered kernel": that is the point
        warnings.simplefilter("ignore")
        for full in names:
            try:
                library.impl(full, _kernel_hook(full), "AutogradCPU")
            except RuntimeError:
                continue
            hooked += 1
    return hooked


def unhook_backward_kernels() -> None:
    """Take the hooks out again: check() grades inside a student's own kernel and leaves torch as it found it."""
    while _KERNEL_HOOKS:
        _KERNEL_HOOKS.pop()._destroy()


def _kernel_hook(full: str):
    base, _, overload = full.partition(".")
    refuse = _tripwire(f"torch's backward kernel aten::{base}")
    below = torch._C._AutoDispatchBelowAutograd
    op: list = []  # looked up on first use: 262 lookups up front cost more than all the hooks

    def hook(*args, **kwargs):
        if _IN_STUDENT[0]:
            refuse()
        if not op:
            op.append(getattr(getattr(torch.ops.aten, base), overload or "default"))
        with below():
            return op[0](*args, **kwargs)

    return hook


def _one_thread(n=1):
    """torch.set_num_threads in a child: a child runs on one thread (it may start none), so the request is moot."""


def _no_grad_instead(mode=True):
    """torch.inference_mode in a child: inference mode skips the autograd dispatch key, where the hooks sit.

    Grad mode is off for a child's whole life, so no_grad is what inference_mode(True) or (False) does there;
    the bare decorator (`@torch.inference_mode`) gets the function itself.
    """
    return torch.no_grad()(mode) if callable(mode) else torch.no_grad()


_WARM = [False]


def warm_up():
    """Run, before any student code, the torch paths that import modules lazily (the student cannot import).

    Done once in the parent before it forks; a child forked from a warm parent has nothing left to import.
    """
    hook_backward_kernels()  # each time: check() takes them out of a student's kernel after grading
    if _WARM[0]:
        return
    _WARM[0] = True
    import_allowed()  # here, not on import: `grade exN` forks its child first, and the child imports them
    x = torch.zeros(4, 3)
    x[range(2), torch.tensor([0, 1])] = 1.0
    x.index_add_(0, torch.tensor([0, 0]), torch.ones(2, 3))
    torch.nn.functional.one_hot(torch.tensor([1, 2]), 3).float() @ x.T
    torch.nn.functional.cross_entropy(x, torch.tensor([0, 1, 2, 0]))
    # 1,600 values, past print's threshold of 1,000: shown summarised; its own generator leaves torch's draws alone
    big = torch.randn(40, 40, generator=torch.Generator().manual_seed(0))  # (40, 40)
    for shown in (x, big, x.double(), x[0], x.sum(), torch.tensor([1, 2])):  # printing imports too
        repr(shown), str(shown), f"{shown}", format(shown.sum().item(), ".4f"), shown.tolist()
    torch.set_default_device("cpu")  # imports torch.utils._device on first use; None puts the default back
    torch.set_default_device(None)
    state = torch.get_rng_state()  # torch.manual_seed imports on first use; the grader's own draws stay as they were
    torch.manual_seed(0)
    torch.set_rng_state(state)
    if "numpy" in sys.modules:  # an ndarray's .sum(0), .mean() ... import numpy._core._methods on first use
        sys.modules["numpy"].random.default_rng(0).random(2)  # numpy.random is imported on first use too
        np = sys.modules["numpy"]
        str(np.arange(3.0)), repr(np.arange(3.0)), repr(np.float32(1)), repr(np.dtype("float32"))  # printing
        a = sys.modules["numpy"].ones((2, 2))
        a.sum(0), a.mean(0), a.std(0), a.var(0), a.max(0), a.min(0), a.prod(0), a.any(), a.all(), a.cumsum(0)


def arm():
    """Switch grad mode off for good and arm every tripwire: from here on, nothing in this child needs autograd."""
    _REAL_SET_GRAD[0](False)
    torch.sparse.check_sparse_tensor_invariants.enable()  # a sparse tensor built wrong raises at the student's line
    install_autograd_tripwires()
    _close_reflection()
    torch.set_num_threads = _one_thread  # a child has one thread: more would make OpenMP exit the process
    torch.use_deterministic_algorithms = _deterministic_algorithms
    torch.compile = _compile_eagerly
    torch.compiler.compile = _compile_eagerly
    torch.compiler.disable = _not_compiled
    # torch.testing.assert_close would import torch.distributed.tensor (0.7 s) to look for DTensors, which no child
    # can hold: it skips that look when distributed counts as absent
    torch.testing._comparison._HAS_DTENSOR = False
    _SEQUENCE[0] = _sequence_nr()  # what the grader built before this child existed does not count
    _IN_STUDENT[0] = True


def _deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """torch.use_deterministic_algorithms, as a child runs it: the same switch, without first setting the compiler's
    own flag (that imports torch._inductor, ~800 modules no child can import, and nothing in a child compiles)."""
    torch._C._set_deterministic_algorithms(mode, warn_only=warn_only)


def _compile_eagerly(model=None, **options):
    """torch.compile, as a child runs it: the function itself, run eagerly (the compiler needs files and processes
    no child has, and compiling changes how fast a function runs, not what it returns)."""
    return (lambda fn: fn) if model is None else model


def _not_compiled(fn=None, recursive=True, *, reason=None):
    """torch.compiler.disable, as a child runs it: nothing is compiled there, so the function itself."""
    return (lambda f: f) if fn is None else fn


# named as torch names them, so a student's mistake in calling one reads as it would on a laptop
_deterministic_algorithms.__name__ = _deterministic_algorithms.__qualname__ = "use_deterministic_algorithms"
_compile_eagerly.__name__ = _compile_eagerly.__qualname__ = "compile"
_not_compiled.__name__ = _not_compiled.__qualname__ = "disable"


_PLAIN_ANNOTATION = re.compile(r"[\w.\[\], |]*")  # names, dots, subscripts, `|`: no call, no string, no operator
_PRIVATE_NAME = re.compile(r"(?<![\w])_")  # a name that starts with _: "0._C" in a format field, "torch._C"


def _close_reflection():
    """Close two evals by another name: format fields (get_field("0._C", (torch,), {}) is a getattr) and string
    annotations (functools.singledispatch's register evaluates them with typing.get_type_hints)."""
    real_get_field = string.Formatter.get_field

    def get_field(self, field_name, args, kwargs):
        if isinstance(field_name, str) and _PRIVATE_NAME.search(field_name):
            raise AttributeError(f"private attributes are not reachable through format fields: {field_name[:60]!r}")
        return real_get_field(self, field_name, args, kwargs)

    string.Formatter.get_field = get_field
    real_evaluate = typing.ForwardRef._evaluate

    def evaluate(self, *args, **kwargs):
        text = self.__forward_arg__
        if not isinstance(text, str) or not _PLAIN_ANNOTATION.fullmatch(text) or _PRIVATE_NAME.search(text):
            raise NameError(f"a string annotation must be a plain dotted name here, not {str(text)[:60]!r}")
        return real_evaluate(self, *args, **kwargs)

    typing.ForwardRef._evaluate = evaluate


def install_autograd_tripwires():
    """Make every autograd entry point, public and private, record the call and refuse."""
    T = torch.Tensor
    T.backward = _tripwire("Tensor.backward()")
    refuse_requires_grad = _tripwire("Tensor.requires_grad_()")
    real_requires_grad_ = T.requires_grad_

    def requires_grad_(self, requires_grad=True):
        if requires_grad:  # requires_grad_(False) is what an honest student writes to be sure: it builds nothing
            refuse_requires_grad()
        return real_requires_grad_(self, False)

    T.requires_grad_ = requires_grad_
    T.retain_grad = _tripwire("Tensor.retain_grad()")
    base_rg = torch._C.TensorBase.requires_grad

    def set_requires_grad(self, value):
        if value:
            _tripwire("Tensor.requires_grad = True")()
        base_rg.__set__(self, value)

    T.requires_grad = property(base_rg.__get__, set_requires_grad)
    torch.autograd.backward = _tripwire("torch.autograd.backward()")
    torch.autograd.grad = _tripwire("torch.autograd.grad()")
    for name in ("jacobian", "hessian", "vjp", "jvp", "hvp", "vhp"):
        setattr(torch.autograd.functional, name, _tripwire(f"torch.autograd.functional.{name}()"))
    for name in ("grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "linearize"):  # not vmap
        if hasattr(torch.func, name):
            setattr(torch.func, name, _tripwire(f"torch.func.{name}()"))
    fwd = torch.autograd.forward_ad
    # unpack_dual stays: printing any tensor calls it, and with no dual level (tripwired) there is nothing to unpack
    for name in ("make_dual", "dual_level", "enter_dual_level", "exit_dual_level"):
        if hasattr(fwd, name):
            setattr(fwd, name, _tripwire(f"torch.autograd.forward_ad.{name}"))
    torch.inference_mode = torch.autograd.inference_mode = torch.autograd.grad_mode.inference_mode = _no_grad_instead
    for name in ("_make_dual",):
        if hasattr(torch, name):
            setattr(torch, name, _tripwire(f"torch.{name}"))
    # the private routes: the grad-mode setter, the engine, forward-mode levels
    real_set = torch._C._set_grad_enabled

    def set_grad_enabled(mode):
        if mode and _IN_STUDENT[0]:
            _tripwire("torch._C._set_grad_enabled(True)")()
        return real_set(mode)

    torch._C._set_grad_enabled = set_grad_enabled
    guards = ("_AutoDispatchBelowAutograd", "_AutoDispatchBelowADInplaceOrView", "_ExcludeDispatchKeyGuard")
    guards += ("_IncludeDispatchKeyGuard", "_InferenceMode", "_RestorePythonTLSSnapshot")  # the hooks' key skipped
    for name in ("_set_fwd_grad_enabled", "_enter_dual_level", "_exit_dual_level", "_ImperativeEngine", *guards):
        if hasattr(torch._C, name):
            setattr(torch._C, name, _tripwire(f"torch._C.{name}"))
    from torch.autograd import variable

    variable.Variable._execution_engine = _Tripped("the autograd engine")
    variable.ImperativeEngine = _Tripped("torch.autograd.variable.ImperativeEngine")
    torch._C._EngineBase = _Tripped("torch._C._EngineBase")
    enable = _tripwire("torch.enable_grad()")
    torch.enable_grad.__init__ = lambda self, *a, **k: enable()
    real_init = torch.set_grad_enabled.__init__
    refuse_set = _tripwire("torch.set_grad_enabled(True)")

    def set_grad_enabled_init(self, mode, *args, **kwargs):
        if mode and _IN_STUDENT[0]:
            refuse_set()
        real_init(self, mode, *args, **kwargs)

    torch.set_grad_enabled.__init__ = set_grad_enabled_init


def _guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
    if level:
        raise BlockedImport(f"relative import of {name!r} is blocked: each exercise file stands alone")
    if name in STAND_INS:  # sys.stderr, sys.path, types.SimpleNamespace: the everyday names, nothing else
        beyond = [n for n in fromlist or () if n not in STAND_INS[name] and n != "*"]
        if beyond:  # `from sys import exc_info`: say what there is, not "cannot import name (unknown location)"
            raise BlockedImport(missing(name, beyond[0]))
        if name not in _STAND_INS_MADE:  # one per execution of the file (load() empties this): none outlives it
            _STAND_INS_MADE[name] = stand_in(name)
        return _STAND_INS_MADE[name]
    if name not in ALLOWED_IMPORTS and not (name.startswith(("torch.", "numpy.")) and name in sys.modules):
        # torch's C++ (and numpy's C printing) import their own modules through the caller's __import__; those
        # already loaded may pass
        allowed = ", ".join(allowed_imports())
        raise BlockedImport(f"import of {name!r} is blocked by the grader's sandbox; allowed modules: {allowed}")
    return __import__(name, globals, locals, fromlist, level)


_STAND_INS_MADE: dict = {}  # module name -> the stand-in this execution of the file was given
_REMOVED_BUILTINS = ("open", "input", "breakpoint", "help", "exit", "quit", "copyright", "credits", "license")


def _student_builtins() -> dict:
    """Return a fresh builtins dict for one execution of a student's file (taken from what prepare_forks kept)."""
    if _BUILTINS:
        return dict(_BUILTINS[0])
    names = {k: v for k, v in vars(builtins).items() if k not in _REMOVED_BUILTINS}
    names["__import__"] = _guarded_import
    return names


_BUILTINS: list[dict] = []  # the builtins a student's file gets, made once in a zygote before any student code


def scrub_secrets():
    """Drop, in this child's copy of memory only, every true gradient and every secret the parent holds."""
    arena.ARENA.drop()  # the true gradients: one madvise per mapping, the pages read as zeros, nothing is copied
    forget.forget_all()  # what each holder of a secret registered (the course's Policy, the run's key, ...)


def _safe_str(exc: BaseException) -> str:
    try:
        text = str(exc)
    except BaseException:  # noqa: B036 - a hostile __str__
        text = "<unprintable>"
    return text[:600]


def describe_exception(exc: BaseException, path: str | None) -> dict:
    """Name an exception and the student's line that raised it."""
    info = {"type": type(exc).__name__[:100], "message": _safe_str(exc), "line": None, "code": None, "function": None}
    if isinstance(exc, SyntaxError) and exc.filename == path:
        info.update(line=exc.lineno, code=(exc.text or "").strip()[:300], message=str(exc.msg)[:600])
        return info
    try:
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == path]
    except BaseException:  # noqa: B036
        frames = []
    if frames:
        info.update(line=frames[-1].lineno, code=(frames[-1].line or "").strip()[:300], function=frames[-1].name)
    info["memory"] = isinstance(exc, MemoryError) or "can't allocate memory" in info["message"]
    return info


class ChildServer:
    """The loop inside a child: load the exercise file, call a function, send the result."""

    def __init__(self, req_r: int, rep_w: int, protections: jail.Protections, shared=None):
        self.req_r, self.rep_w = req_r, rep_w
        self.protections = protections
        self.shared = shared  # the inputs, written by the parent into memory both map; None: they come in the frame
        self.in_place = False  # whether the request being served has its inputs in shared memory
        self.path, self.text = "", ""
        self.namespace: dict = {}

    def serve(self):
        handlers = {"load": self.load, "call": self.call}
        while True:
            request = self._receive()
            if request is None:
                os._exit(0)
            if request["op"] == "calls":  # one reply frame per run, each under its own deadline in the parent
                for run in request["runs"]:
                    self.send(*self.call({"function": request["function"], **run}))
                continue
            registered = forget.handler(request["op"])
            if registered is not None:
                del _AUTOGRAD_CALLS[:]
                header, blob = registered(self, request)
            else:
                header, blob = handlers[request["op"]](request)
            self.send(header, blob)

    def _receive(self):
        prefix = self._read_exact(wire.PREFIX_SIZE)
        if prefix is None:
            return None
        nhead, nblob = wire.read_lengths(prefix)
        head, blob = self._read_exact(nhead), self._read_exact(nblob)
        if head is None or blob is None:
            return None
        request = wire.decode_header(head)
        self.in_place = bool(request.get("shared")) and self.shared is not None
        buffer = self.shared if self.in_place else blob
        for run in [request, *request.get("runs", ())]:
            if "args" in run:
                run["args"] = {k: wire.own_value(v, buffer, self.in_place) for k, v in run["args"].items()}
        return request

    _pending = b""  # read from the request pipe past the frame being read: one read takes a whole small frame

    def _read_exact(self, size):
        pending = self._pending
        while len(pending) < size:
            chunk = os.read(self.req_r, max(size - len(pending), 1 << 16))
            if not chunk:
                return None
            pending += chunk
        self._pending = pending[size:]
        return pending[:size]

    def send(self, header, blob=b""):
        header["out_end"] = _output_size()  # where this reply's prints end, for the parent to cut them there
        try:
            frame = wire.pack(header, blob)
        except (TypeError, ValueError):
            frame = wire.pack({"ok": False, "error": {"type": "GraderError", "message": "unencodable reply"}})
        view = memoryview(frame)
        while view:
            view = view[os.write(self.rep_w, view) :]

    def load(self, request) -> tuple[dict, bytes]:
        """Execute the exercise file afresh and report its functions' parameter names."""
        if "text" in request:
            self.path, self.text = request["path"], request["text"]
            linecache.cache[self.path] = (len(self.text), None, self.text.splitlines(True), self.path)
        self.namespace = {}
        _STAND_INS_MADE.clear()
        module = types.ModuleType("submission")  # registered: dataclasses looks a module's string annotations up
        module.__file__, module.__builtins__ = self.path, _student_builtins()
        sys.modules["submission"] = module
        namespace = module.__dict__
        try:
            code = self._compiled()
            exec(code, namespace)
            _grad_mode_check()
        except BaseException as exc:  # noqa: B036 - a student's module may raise anything, SystemExit included
            return {"ok": False, "error": describe_exception(exc, self.path)}, b""
        self.namespace = namespace
        functions = {}
        for name, obj in list(namespace.items()):
            if callable(obj) and not name.startswith("_") and len(functions) < wire.MAX_ITEMS:
                functions[name[:200]] = _signature(obj)
        walls = {k: v for k, v in vars(self.protections).items() if isinstance(v, bool)} if self.protections else {}
        return {"ok": True, "functions": functions, "walls": walls}, b""

    _code: tuple = (None, None, None)  # (path, text, code object) of the file compiled last

    def _compiled(self):
        """Return the file's code object, compiled once per text (Ex4's file is executed afresh before each call)."""
        path, text, code = self._code
        if path != self.path or text is not self.text:
            code = mainblock.compile_module(self.text, self.path)  # its __main__ blocks never run
            self._code = (self.path, self.text, code)
        return code

    def call(self, request) -> tuple[dict, bytes]:
        """Call one student function with the inputs the parent sent; report its result and the inputs after."""
        if request.get("reload"):  # re-execute the file, so no module state survives from the previous call
            loaded, _ = self.load({})
            if not loaded["ok"]:
                return loaded, b""
        fn = self.namespace.get(request["function"])
        args = request["args"]
        enc = wire.Encoder()
        del _AUTOGRAD_CALLS[:]
        header: dict = {"ok": True}
        try:
            value = _call(fn, args)
            _grad_mode_check()
            with torch._C.DisableTorchFunction():  # a tensor subclass's __torch_function__ never runs from here on
                header["value"] = enc.value(_as_plain(value))
        except BaseException as exc:  # noqa: B036 - SystemExit and friends are student failures too
            header = {"ok": False, "error": describe_exception(exc, self.path)}
        if not self.in_place:  # the spawn backend: no shared memory, so the child reports a digest of each input
            try:
                with torch._C.DisableTorchFunction():
                    header["after"] = {
                        k: wire.digest(_as_plain(v)) for k, v in args.items() if isinstance(v, torch.Tensor)
                    }
            except BaseException as exc:  # noqa: B036 - an input the student turned into something else
                header = {"ok": False, "error": describe_exception(exc, self.path), "after": {}}
        _grad_mode_check()
        header["autograd"] = sorted(set(_AUTOGRAD_CALLS))[:16]
        return header, enc.blob()

    def student_function(self, name: str):
        """Return the loaded student function of that name, wrapped so that each call is checked like a graded one.

        The wrapper records autograd the call used and hands back plain tensors (dicts of them too).
        """
        fn = self.namespace.get(name)

        @functools.wraps(fn)
        def checked(**kwargs):
            result = fn(**kwargs)
            _grad_mode_check()
            with torch._C.DisableTorchFunction():
                return {k: _as_plain(v) for k, v in result.items()} if isinstance(result, dict) else result

        return checked

    def autograd_calls(self) -> list[str]:
        """Return the autograd entry points student code reached in the current request."""
        return sorted(set(_AUTOGRAD_CALLS))[:16]


def _output_size() -> int:
    """Return the size of the output file after flushing what was printed (-1 if it cannot be told)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # noqa: B036 - a stream the student replaced
            pass
    try:
        return os.lseek(1, 0, os.SEEK_END)  # the child is the file's only writer: its end is where prints go
    except OSError:
        return -1


def _as_plain(value):
    """Return a returned tensor as a plain, dense torch.Tensor (a subclass could run code on every op), dicts too."""
    if isinstance(value, dict):
        return {k: _as_plain(v) for k, v in list(value.items())[: wire.MAX_ITEMS]}
    if not isinstance(value, torch.Tensor):
        return value
    try:
        return _plain_tensor(value)
    except Exception as exc:  # noqa: BLE001 - the value, not the student's code, is what cannot be read
        return wire.Unreadable(f"tensor whose values cannot be read ({type(exc).__name__}: {_safe_str(exc)[:120]})")


def _plain_tensor(value: torch.Tensor):
    """Return a tensor as a plain, dense, strided torch.Tensor, or wire.Unreadable for one without values."""
    if value.is_meta or value.is_nested:
        return wire.Unreadable(wire.unreadable(value))
    if value.layout != torch.strided:  # a sparse dC is a dC: its values count
        if value.layout == torch.sparse_coo:  # indices out of range would crash to_dense: refuse them by name
            torch._validate_sparse_coo_tensor_args(value._indices(), value._values(), value.shape)
        elif value.layout in (torch.sparse_csr, torch.sparse_csc, torch.sparse_bsr, torch.sparse_bsc):
            compressed, plain = (
                (value.crow_indices(), value.col_indices())
                if value.layout in (torch.sparse_csr, torch.sparse_bsr)
                else (value.ccol_indices(), value.row_indices())
            )
            torch._validate_sparse_compressed_tensor_args(compressed, plain, value.values(), value.shape, value.layout)
        value = value.to_dense()
    if type(value) is not torch.Tensor:
        value = torch.Tensor._make_subclass(torch.Tensor, value.detach(), False)
    return value


def _grad_mode_check():
    """Record and undo grad mode switched on by student code, and record any autograd graph it built."""
    if _is_grad_enabled():
        _AUTOGRAD_CALLS.append("torch.set_grad_enabled(True)")
        _REAL_SET_GRAD[0](False)
    now = _sequence_nr()
    if now != _SEQUENCE[0]:
        _SEQUENCE[0] = now
        _AUTOGRAD_CALLS.append("autograd by another route (torch.ops, TorchScript, ...): a gradient graph was built")


def _call(fn, args: dict):
    """Call fn with its inputs by name; those before a `/` (positional-only) go by position, in order."""
    if type(fn) is types.FunctionType and not fn.__code__.co_posonlyargcount and not _SIGNED.intersection(fn.__dict__):
        return fn(**args)  # a plain function without a `/`: what its signature would say, without reading it
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return fn(**args)
    positional, args = [], dict(args)  # the caller's dict stays whole: every input is digested after the call
    for p in params:
        if p.kind != p.POSITIONAL_ONLY:
            break
        if p.name not in args and p.default is p.empty:
            break  # a missing input: the call raises TypeError as it would anywhere
        positional.append(args.pop(p.name) if p.name in args else p.default)
    return fn(*positional, **args)


UNREADABLE_SIGNATURE = (
    "its parameters cannot be read; define it with a plain `def` that names each input it needs as a parameter"
)
_SIGNED = frozenset({"__wrapped__", "__signature__", "_partialmethod"})  # what inspect.signature reads first


def _signature(fn) -> dict:
    """Return a function's parameters as the parent binds them: names, which have defaults, and why it cannot."""
    try:  # student objects: a __signature__ or a defaults table of their own may raise anything
        plain = type(fn) is types.FunctionType and not _SIGNED.intersection(fn.__dict__)
        if plain and len(fn.__defaults__ or ()) <= fn.__code__.co_argcount:  # (more defaults: inspect's reading)
            kinds = _plain_parameters(fn)  # what inspect.signature reads, read straight from the code object
        else:
            kinds = [(p.name, p.kind, p.default is not p.empty) for p in inspect.signature(fn).parameters.values()]
    except BaseException:  # noqa: B036 - SystemExit and friends from a student's property too
        return {"params": [], "error": UNREADABLE_SIGNATURE}
    params = [{"name": name[:200], "default": default} for name, kind, default in kinds if kind not in (_STAR, _STARS)]
    stars = [("*" if kind == _STAR else "**") + name[:100] for name, kind, _ in kinds if kind in (_STAR, _STARS)]
    error = None
    if stars and not params:  # (*args, **kw) alone, a decorator without functools.wraps: nothing to bind by name
        error = (
            f"{stars[0]} cannot be bound: name each input you need as a parameter (a decorator keeps the "
            "parameters visible only with functools.wraps)"
        )
    # beside named parameters, *args and **kw are given nothing: `def dW2(h, dlogits, **unused)` gets h and dlogits
    return {"params": params[: wire.MAX_ITEMS], "error": error}


_STAR, _STARS, _EMPTY = inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD, inspect.Parameter.empty
_VARARGS, _VARKEYWORDS = inspect.CO_VARARGS, inspect.CO_VARKEYWORDS


def _plain_parameters(fn: types.FunctionType) -> list[tuple[str, object, bool]]:
    """Return (name, kind, has a default) of a plain function's parameters, in inspect.signature's order."""
    code = fn.__code__
    positional, keyword_only = code.co_argcount, code.co_kwonlyargcount
    names = code.co_varnames
    defaults, kwdefaults = fn.__defaults__ or (), fn.__kwdefaults__ or {}
    first_default = positional - len(defaults)
    out = [(names[k], None, k >= first_default) for k in range(positional)]
    at = at_kw_end = positional + keyword_only
    if code.co_flags & _VARARGS:
        out.append((names[at], _STAR, False))
        at += 1
    out += [(names[k], None, kwdefaults.get(names[k], _EMPTY) is not _EMPTY) for k in range(positional, at_kw_end)]
    if code.co_flags & _VARKEYWORDS:
        out.append((names[at], _STARS, False))
    return out


def child_main(req_r: int, rep_w: int, out_fd: int, limits, uid: int, pid_ns: bool, jail_path: str | None, shared=None):
    """Become a sandbox: close everything inherited, scrub the answers, enter the jail, then serve requests."""
    gc.freeze()  # the inherited heap is never collected here: a full collection would walk all of torch
    jail.set_name("grade-sandbox")
    os.setsid()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    req_r, rep_w = settle_descriptors(req_r, rep_w, out_fd)
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # the parent's may wrap another fd (pytest's capture)
    sys.stderr = open(2, "w", buffering=1, closefd=False)
    if not _PREPARED[0]:  # a zygote did this once for every child it forks (prepare_forks)
        scrub_secrets()
        torch.set_num_threads(1)
        warm_up()
    protections = jail.enter(jail_path or jail.jail().path, uid, limits, pid_ns)
    if not _PREPARED[0]:
        arm()
    ChildServer(req_r, rep_w, protections, shared).serve()


_PREPARED = [False]


def prepare_forks() -> None:
    """Scrub, warm and arm this process as every sandbox child does, once, in a zygote that only forks children.

    Each child forked from it then starts scrubbed and armed (and finds its allow-list built: syscalls.prebuild),
    instead of doing it again, and shares the pages that doing it wrote.
    """
    scrub_secrets()
    torch.set_num_threads(1)
    warm_up()
    arm()
    _BUILTINS.append(_student_builtins())
    jail.syscalls.prebuild(1)  # a child in its own PID namespace sees itself as PID 1
    gc.freeze()
    _PREPARED[0] = True


REQUEST_FD, REPLY_FD = 3, 4  # below syscalls.MAX_FD, whatever numbers the parent's pipes had


def settle_descriptors(req_r: int, rep_w: int, out_fd: int) -> tuple[int, int]:
    """Keep only what a child needs, at fixed numbers: 0 an empty pipe of its own (no host file to lock), 1 and 2
    the output file, 3 the requests, 4 the replies; close everything else. Return (3, 4)."""
    high = [os.dup(fd) for fd in (req_r, rep_w, out_fd)]  # out of the way of 0-4 first
    high = [fcntl_dup(fd) for fd in high]
    empty_r, empty_w = os.pipe()
    os.close(empty_w)  # reading fd 0 gives end of file at once
    os.dup2(empty_r, 0)
    os.dup2(high[2], 1)
    os.dup2(high[2], 2)
    os.dup2(high[0], REQUEST_FD)
    os.dup2(high[1], REPLY_FD)
    for fd in os.listdir("/proc/self/fd"):
        if int(fd) > REPLY_FD:
            try:
                os.close(int(fd))
            except OSError:
                pass
    return REQUEST_FD, REPLY_FD


def fcntl_dup(fd: int) -> int:
    """Return a duplicate of fd numbered 10 or above (so that the dup2 calls that follow cannot overwrite it)."""
    import fcntl

    new = fcntl.fcntl(fd, fcntl.F_DUPFD, 10)
    os.close(fd)
    return new
