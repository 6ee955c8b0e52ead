"""SyncBatchNorm: batch normalisation whose statistics are taken over the batches of every worker.

In training, each worker sums its batch's per-channel values and squares and counts its samples; one
allreduce (Sum) of those 2C + 1 numbers gives every worker the whole batch's mean and variance. The
allreduce is differentiable (its backward sums the gradients of the statistics over the workers), so
autograd gives the gradient of the synchronised normalisation without a hand-written backward. In eval
mode it is an ordinary BatchNorm with the running statistics.
"""
import torch
import torch.nn.functional as F
from torch.nn.modules.batchnorm import _BatchNorm

from zps.torch.ops import Sum, allreduce


class SyncBatchNorm(_BatchNorm):
    """torch.nn.SyncBatchNorm's arguments; the statistics are synchronised over all zps workers."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError("zps.torch.SyncBatchNorm: expected at least 2D input (got %dD)" % input.dim())

    def forward(self, input):
        self._check_input_dim(input)
        if not (self.training or not self.track_running_stats):
            return F.batch_norm(input, self.running_mean, self.running_var, self.weight, self.bias, False, 0.0,
                                self.eps)
        channels = input.shape[1]
        dims = [d for d in range(input.dim()) if d != 1]
        x = input.float() if input.dtype in (torch.float16, torch.bfloat16) else input
        count = torch.tensor([x.numel() / channels], dtype=x.dtype)
        stats = torch.cat([x.sum(dims), (x * x).sum(dims), count])
        total = allreduce(stats, op=Sum)
        n = total[-1]
        mean = total[:channels] / n
        var = total[channels:2 * channels] / n - mean * mean
        if self.training and self.track_running_stats:
            with torch.no_grad():
                self.num_batches_tracked.add_(1)
                factor = self.momentum if self.momentum is not None else 1.0 / float(self.num_batches_tracked)
                unbiased = var * (n / (n - 1)) if float(n) > 1 else var
                self.running_mean.mul_(1 - factor).add_(mean.detach().to(self.running_mean.dtype), alpha=factor)
                self.running_var.mul_(1 - factor).add_(unbiased.detach().to(self.running_var.dtype), alpha=factor)
        shape = [1, channels] + [1] * (input.dim() - 2)
        y = (x - mean.view(shape)) / torch.sqrt(var.view(shape) + self.eps)
        if self.affine:
            y = y * self.weight.view(shape) + self.bias.view(shape)
        return y.to(input.dtype)
