"""The registered schedulers' names as constants.

Code outside a scheduler's own module refers to a scheduler by these
constants (or through the registry), never by a string literal, so that a
name lives in exactly two places: here and in its scheduler's module.
"""

SEQUENTIAL = "sequential"
WFBP = "wfbp"
SYNCEASGD = "synceasgd"
MGWFBP = "mgwfbp"
OPTIMAL = "optimal"
BUCKET = "bucket"
HOROVOD = "horovod"
DDP = "ddp"
BYTESCHEDULER = "bytescheduler"
DEAR = "dear"
ZERO1 = "zero1"
ZERO2 = "zero2"
ZERO3 = "zero3"
