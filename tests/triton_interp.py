"""The start of a script that runs vdr's fused MaxSim kernel under Triton's CPU interpreter.

Triton picks interpreter mode when it is imported, so the kernel checks run in a fresh process with
``TRITON_INTERPRET=1`` from the start. NumPy 2 refuses ``int()`` of a one-element array, which the
interpreter does for ``range`` bounds: the prelude gives it a 0-d read. It imports ``json``, ``sys``,
``os``, ``torch``, ``vdr.retrieve.maxsim_gpu as G`` and ``vdr.retrieve.maxsim as scoring``, and defines
``unit(n, g, dtype)``: n random unit vectors of 128 dimensions.
"""

PRELUDE = r"""
import json, sys
import triton.runtime.interpreter as interp
_orig = interp._patch_lang_tensor
def _patched(tensor):
    _orig(tensor)
    tensor.__index__ = lambda self: int(self.handle.data.reshape(-1)[0])
interp._patch_lang_tensor = _patched
import os, torch
import vdr.retrieve.maxsim_gpu as G
from vdr.retrieve import maxsim as scoring

def unit(n, g, dtype=torch.float16):
    return torch.nn.functional.normalize(torch.randn(n, 128, generator=g), dim=-1).to(dtype)
"""
