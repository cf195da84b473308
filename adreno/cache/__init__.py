"""OpenCL program-binary cache: build a program from source once, load its binary afterwards.

Building OpenCL programs from source (`clBuildProgram`) dominates the start-up time of mobile GPU apps;
loading a program binary the driver produced earlier is one to two orders of magnitude faster. A binary is
only valid for the exact device, driver, compiler inputs and toolchain that produced it, and a driver may
crash on a bad one, so this cache never hands the driver a binary it cannot vouch for.

The format is specified here, once; each part of it has one module:
    format.py    the key fields and their hash, the entry file's layout, the versions a key depends on
    files.py     durable writes and reads of regular files only (every reader goes through it)
    guard.py     the crash guard (markers, quarantine)
    store.py     `ProgramCache`: the entries, eviction, `build` (bundle, then cache, then source)
    bundled.py   `BundledBinaries`: reading an artifact's bundle for one device
    export.py    `export_bundle` and `verify_bundles`: writing and checking bundles
    tvm_blob.py  TVM's precompiled-program blob
Each imports only those above it in this list (bundled.py before store.py, which uses it); this package re-exports
the public names.

Key
    One entry per program. Its key is the SHA-256 (hex) of the canonical JSON (sorted keys, compact
    separators, ASCII) of these fields: ``cache_format`` (`CACHE_FORMAT_VERSION`), ``adreno``
    (`adreno.__version__`), ``tvm`` (`tvm.__version__`), ``platform_name``, ``platform_version``,
    ``device_name``, ``driver_version`` (`CL_DRIVER_VERSION`), ``opencl_c_version``, ``options`` (build
    options) and ``source_sha256`` (SHA-256 of the UTF-8 kernel source). Changing any of them changes the key.

Directory layout (root: `default_cache_dir()` unless given)
    ``<key>.clbin``                  one entry per program
    ``.<key>.<pid>.<random>.tmp``    an entry being written (renamed over ``<key>.clbin`` when complete)
    ``.lock``                        the write lock (``fcntl.flock``) taken by every writer and by `clear`
    ``guard/<device-key>.<token>.loading``  crash-guard markers (see below)
    ``quarantine/<key>``             entries crashed loads touched, with their count of crashes

Entry file format (integers little-endian)
    ======  ======  ==========================================================================
    offset  size    field
    ======  ======  ==========================================================================
    0       8       magic ``b"ADRCLBIN"``
    8       4       u32 entry format version (`CACHE_FORMAT_VERSION`)
    12      4       u32 H: length of the JSON header that follows
    16      H       header: the canonical JSON of the key fields above (the key is its SHA-256)
    16+H    32      SHA-256 of the binary
    48+H    rest    the program binary as returned by ``CL_PROGRAM_BINARIES``
    ======  ======  ==========================================================================

    On load the magic, the version, the lengths, the checksum of the binary and the header (byte for
    byte against the header the caller's key fields produce) are all checked; any mismatch, a missing or
    unreadable file, or a binary the driver rejects is a *miss*: the program is built from source, the
    entry is replaced and one line is logged on the ``adreno.cache`` logger. Nothing about a bad entry
    raises.

Concurrency
    Writers hold ``.lock`` (an exclusive ``flock``) while they write a temporary file in the same
    directory, ``fsync`` it, ``os.replace`` it over the entry and evict. Readers take no lock: a rename is
    atomic, so a reader sees the old entry, the new one, or none, never a torn one. Entries carry their
    last use in their mtime (set on write and on every hit); past ``max_bytes`` the least recently used
    entries are evicted.

Crash guard
    Drivers have been known to crash on bad binaries. Before handing a binary to the driver the cache
    creates a marker ``guard/<device-key>.<token>.loading`` (device key: hash of platform, device and
    driver identity) holding an exclusive ``flock`` on it, and removes it after the load. A marker whose
    lock can be taken while it is still in place was left by a process that died during a load (the
    kernel releases the lock of a dead process). The marker names the entry that load touched (its key): the
    next process that looks quarantines that entry (removes it, and counts the crash under ``quarantine/``)
    and removes the marker. The rest of the cache stays in use. A key whose loads crashed once is rebuilt from
    source and cached again (a SIGKILL or an OOM kill that happened to land in a load costs one rebuild); one
    whose loads crashed `BLOCK_AFTER_CRASHES` times (a binary the driver cannot take) is never loaded, stored
    or taken from a bundle again: `ProgramCache.build` builds it from source and reports ``"disabled"``.
    `ProgramCache.clear` lifts the quarantine.

Only regular files are read
    Every file the cache reads (entries, markers, bundles) is opened non-blocking and checked with ``fstat``
    before it is read, and read up to a size limit: a FIFO, a device or a huge file in place of an entry is a
    bad entry, never a hang (`files.read_regular`).

Binaries bundled in an artifact
    `export_bundle` writes every program of an artifact, built for one device, into
    ``<artifact>/binaries/<device>/`` (entries in the format above, an ``index.json``, and TVM's blob);
    `ProgramCache.build` takes such a bundle (`BundledBinaries`) and loads from it first, verified like a
    cache entry; `ProgramCache.for_artifact` does that for executors. See `BundledBinaries`.

TVM's precompiled-program blob
    `tvm_precompiled_blob` and `read_tvm_precompiled_blob` write and read the blob that TVM's OpenCL
    runtime takes through ``opencl.SetPreCompiledPrograms`` (see `tvm_precompiled_blob` for its layout).
"""

from adreno.opencl.device import DeviceIdentity

from .bundled import BUNDLE_DIR, BUNDLE_FORMAT, BUNDLE_INDEX, TVM_BLOB_NAME, BundledBinaries, bundle_dir_name
from .export import export_bundle, verify_bundles
from .format import CACHE_FORMAT_VERSION, cache_key, default_cache_dir
from .guard import BLOCK_AFTER_CRASHES, CrashGuard
from .store import ArtifactProgramCache, ProgramCache
from .tvm_blob import read_tvm_precompiled_blob, tvm_precompiled_blob

__all__ = ["ArtifactProgramCache", "BLOCK_AFTER_CRASHES", "BUNDLE_DIR", "BUNDLE_FORMAT", "BUNDLE_INDEX",
           "BundledBinaries", "CACHE_FORMAT_VERSION", "CrashGuard", "DeviceIdentity", "ProgramCache", "TVM_BLOB_NAME",
           "bundle_dir_name", "cache_key", "default_cache_dir", "export_bundle", "read_tvm_precompiled_blob",
           "tvm_precompiled_blob", "verify_bundles"]
