"""Gradient compression choices (BytePS and Horovod spell them Compression.none and Compression.fp16).

Each is an object with compress(tensor) -> (tensor, ctx) and decompress(tensor, ctx), as Horovod's are.
zps does not call those for its own two: fp16 uses the worker's own compressor, where float32 pushes travel
as IEEE half and the servers sum in float32, so the sum loses less than summing halves would. Other
dtypes travel uncompressed. A user's own compressor (any object with compress and decompress) is applied
around the sum: allreduce(tensor, compression=mine) sums compress(tensor) and returns its decompress.
"""
import torch


class Compressor:
    """Horovod's interface: compress before the sum, decompress after it."""

    name = "custom"

    @staticmethod
    def compress(tensor):
        raise NotImplementedError

    @staticmethod
    def decompress(tensor, ctx):
        raise NotImplementedError

    def __repr__(self):
        return "Compression.%s" % self.name


class NoneCompressor(Compressor):
    name = "none"

    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


class FP16Compressor(Compressor):
    """Floating-point tensors as float16; others unchanged."""

    name = "fp16"

    @staticmethod
    def compress(tensor):
        if tensor.dtype.is_floating_point:
            return tensor.type(torch.float16), tensor.dtype
        return tensor, tensor.dtype

    @staticmethod
    def decompress(tensor, ctx):
        return tensor.type(ctx) if ctx is not None and tensor.dtype != ctx else tensor


class Compression:
    none = NoneCompressor()
    fp16 = FP16Compressor()
