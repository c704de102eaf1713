"""The aten ops a torch-op call runs (tests of the ops' dispatch without a GPU): a host synchronization shows as
``_local_scalar_dense`` or a copy, an extra launch as any op beside the expected ones. Import after
``pytest.importorskip("torch")``."""

from __future__ import annotations

from torch.utils._python_dispatch import TorchDispatchMode


class Ops(TorchDispatchMode):
    """Records ``str(func)`` of every aten op dispatched inside the ``with`` block in ``self.ops``."""

    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))
