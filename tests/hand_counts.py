"""Hand-derived counts that several test modules check calc against (not a test module)."""

from __future__ import annotations

# Llama-2-7B shapes: h 4096, MLP 11008, 32 layers, 32 heads (MHA), vocab 32000
ELEMENTWISE_FWD_7B = 32 * (2 * 36 * 4096 + 2 * 6 * 4096 + 30 * (4096 + 4096) + 16 * (4096 + 2 * 4096)
                           + 10 * 11008)
