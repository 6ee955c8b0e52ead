"""Gradient compression choices (BytePS and Horovod spell them Compression.none and Compression.fp16).

fp16 uses the worker's own compressor: float32 pushes travel as IEEE half and the servers sum in float32,
so the sum loses less than summing halves would. Other dtypes travel uncompressed.
"""


class _Choice:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return "Compression.%s" % self.name


class Compression:
    none = _Choice("none")
    fp16 = _Choice("fp16")
