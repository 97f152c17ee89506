"""What identifies a computed run, shared by the run cache (:mod:`geocont.cache`) and the results store
(:mod:`geocont.store`): the schema of a cached table, the revision of the runs' numerics, and the key."""

from __future__ import annotations

import hashlib
import json
from typing import Any

#: Bump when the meaning or layout of cached tables changes; old entries are then ignored.
#: 2: entries are versioned with checksums, and runs are computed at a fixed torch thread count.
SCHEMA_VERSION = 2

#: The revision of the runs' numerics: bump it with any code change that alters the numbers a run
#: produces for an unchanged configuration (kernels, subnormal flushing, an optimizer's
#: implementation, data preparation, precision), so that runs cached by earlier code are never read
#: as this code's. A linear residual net's end point is sensitive to perturbations of the size such
#: changes make, so mixing them moves published numbers. Part of the key from revision 2 on (see
#: :meth:`geocont.sweeps.Job.key_config`), so that entries cached at revision 1 keep their keys.
NUMERICS_REVISION = 1


def cache_key(kind: str, config: dict[str, Any]) -> str:
    """Stable hash of ``kind``, the schema version and the configuration."""
    payload = json.dumps({"kind": kind, "schema": SCHEMA_VERSION, "config": config}, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:20]
