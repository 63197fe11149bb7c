"""The layout of :mod:`softswitch.p4rt_kernel`'s input arrays and output rows.

A module of its own so that the server and :mod:`softswitch.p4rt_batch` can use
the numbers without importing numba (the kernel is loaded in the background).
"""

from __future__ import annotations

#: request status returned by the kernel
REQ_OK = 0
REQ_FALLBACK = 1
#: update status (column STATUS)
PLAIN = 0
OTHER = 1
#: columns of a row (one per update); the key slots and parameters follow from VALUES
STATUS, TYPE, TABLE, ACTION, UPD_START, UPD_END, TE_START, TE_END, PRIORITY = range(9)
VALUES = 9
#: header slots
H_DEVICE, H_HAS_ELECTION, H_ELECTION_HIGH, H_ELECTION_LOW, H_ATOMICITY = range(5)
H_SIZE = 5
#: match kinds (as in softswitch.p4rt_fast)
K_EXACT, K_LPM, K_RANGE, K_TERNARY, K_OPTIONAL = range(5)
#: table flags (column 1 of the table array)
T_WRITABLE = 1
T_PRIORITY = 2
#: widest field or parameter the kernel decodes (values are int64)
MAX_WIDTH = 63
