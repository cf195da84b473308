"""The work-group shape a tiled conv config launches with (`adreno.schedules._conv.bind_threads`), for tests that
check a tuned record was applied: channels on threadIdx.z, rows on y, columns on x; with split-K (`threads_k` > 1)
the slices take z and the channels share y with the rows."""


def local_size(threads_x: int, threads_y: int, threads_channels: int, threads_k: int = 1) -> list[int]:
    if threads_k == 1:
        return [threads_x, threads_y, threads_channels]
    return [threads_x, threads_y * threads_channels, threads_k]
