# ===- cache.py - the on-disk cache of compiled libraries -----------------=== #
#
# Part of the moe-mlir project.
#
# ===----------------------------------------------------------------------=== #
"""The on-disk cache of compiled GPU libraries, shared by the compiler side
(`moe_mlir.gpu.compile_cached` fills it) and the runtime (`find_cached` and
`load_cached` read it, also on a machine with only this package).

An entry is keyed by what the generated code depends on:

  source key    sha256 of the module text and the pipeline text (which
                names the chip and every --moe-lower-to-nvvm option)
  compiler key  the compiler's identity (moe_mlir's version and the
                sha256 of the compiler binary that ran: the Python
                extension or moe-aot), so a new compiler never reuses a
                library an older one built

Layout under the cache root:

  <root>/<source key>/<compiler key>/<name>.so
                                    /<name>.manifest.json
                                    /key.json   (both keys, the pipeline,
                                                 the compiler identity)

An entry is valid when key.json names its own keys and the library's
sha256 matches its manifest (`load_manifest`); anything else (a partial
write, a corrupted or replaced library, an entry of an older cache format)
is stale: `compile_cached` rebuilds it. Entries are written into a
temporary folder next to their place and renamed into it, so a reader
never sees half an entry and concurrent builders of one key keep one.

The root: the `root` argument, else $MOE_MLIR_CACHE_DIR, else
$XDG_CACHE_HOME/moe_mlir, else ~/.cache/moe_mlir.
"""

import hashlib
import json
import os
import shutil

from .errors import ManifestError
from .manifest import load_manifest

CACHE_FORMAT = "moe-mlir-cache"
CACHE_VERSION = 1
KEY_FILE = "key.json"


def cache_root(root=None):
    """The cache root folder (not created)."""
    if root:
        return os.path.abspath(os.path.expanduser(root))
    env = os.environ.get("MOE_MLIR_CACHE_DIR")
    if env:
        return os.path.abspath(os.path.expanduser(env))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "moe_mlir")


def source_key(module_text, pipeline):
    """The source key of `module_text` compiled with `pipeline` (text)."""
    h = hashlib.sha256()
    h.update(pipeline.encode())
    h.update(b"\0")
    h.update(module_text.encode())
    return h.hexdigest()


def compiler_key(identity):
    """The compiler key of a compiler identity (a JSON-serialisable dict)."""
    text = json.dumps(identity, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def entry_dir(root, skey, ckey):
    return os.path.join(cache_root(root), skey, ckey)


def valid_entry(folder, skey=None, ckey=None):
    """The library path of the entry in `folder` when it is valid (and, when
    given, has these keys), else None."""
    try:
        with open(os.path.join(folder, KEY_FILE)) as f:
            key = json.load(f)
        if key.get("format") != CACHE_FORMAT or key.get("version") != CACHE_VERSION:
            return None
        if skey is not None and key.get("source_key") != skey:
            return None
        if ckey is not None and key.get("compiler_key") != ckey:
            return None
        if os.path.basename(folder) != key.get("compiler_key"):
            return None
        library = os.path.join(folder, key["library"])
        load_manifest(library)  # the library's sha256 against its manifest
        return library
    except (OSError, ValueError, KeyError, TypeError, ManifestError):
        return None


def find_cached(skey, root=None, ckey=None):
    """The library of a valid entry for source key `skey`: the one built by
    compiler `ckey` when given, else the newest valid one (a machine without
    the compiler takes what any compiler built). None when there is none."""
    base = os.path.join(cache_root(root), skey)
    if ckey is not None:
        return valid_entry(os.path.join(base, ckey), skey, ckey)
    try:
        names = os.listdir(base)
    except OSError:
        return None
    found = []
    for name in names:
        folder = os.path.join(base, name)
        if name.startswith(".") or not os.path.isdir(folder):
            continue
        library = valid_entry(folder, skey)
        if library:
            found.append((os.path.getmtime(os.path.join(folder, KEY_FILE)), library))
    return max(found)[1] if found else None


def load_cached(skey, root=None, ckey=None):
    """`load` of find_cached's library; ManifestError when there is none."""
    from .artifact import load

    library = find_cached(skey, root, ckey)
    if library is None:
        raise ManifestError(
            "no valid cached library for source key %s under %s (compile it with "
            "moe_mlir.gpu.compile_cached, or copy a cache built elsewhere)"
            % (skey, cache_root(root))
        )
    return load(library)


def write_key(folder, skey, ckey, library, pipeline, identity):
    with open(os.path.join(folder, KEY_FILE), "w") as f:
        json.dump(
            dict(
                format=CACHE_FORMAT,
                version=CACHE_VERSION,
                source_key=skey,
                compiler_key=ckey,
                library=os.path.basename(library),
                pipeline=pipeline,
                compiler=identity,
            ),
            f,
            indent=1,
            sort_keys=True,
        )


def publish(staging, folder, skey, ckey):
    """Moves the entry built in `staging` to `folder` (renamed; a stale entry
    there is replaced; a valid one of these keys that another builder put
    there first is kept and `staging` removed). Returns the library path of
    the entry in place."""
    for _ in range(3):
        try:
            os.rename(staging, folder)
            break
        except OSError:
            if valid_entry(folder, skey, ckey):
                shutil.rmtree(staging, ignore_errors=True)
                break
            shutil.rmtree(folder, ignore_errors=True)
    library = valid_entry(folder, skey, ckey)
    if library is None:
        raise ManifestError("the cache entry %s could not be written" % folder)
    return library
