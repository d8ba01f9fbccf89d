"""An exact CPU oracle for the allocated peak of a training step.

The model is built on the meta device from its Hugging Face config, PEFT and gradient
checkpointing are applied, parameters and buffers become fake tensors
(``torch._subclasses.fake_tensor.FakeTensorMode``) and real training steps run: forward
with the loss, backward, optimizer step. :mod:`tools.oracle.tracker` counts the bytes of
every live storage, so the peak is the allocated peak of the same code on a GPU, except
for what :data:`tools.oracle.workarounds.LIMITS` lists. No weights, no GPU.

Usage::

    python -m tools.oracle request.json      # or - for stdin; prints the response JSON
"""

from .run import Unsupported, oracle_estimate  # noqa: F401
