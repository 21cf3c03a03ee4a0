#!/usr/bin/python3
"""Generate tooz-extra.json: lookups computed by real tooz.hashring.HashRing.

Covers what tooz-hashring.json does not: hash functions other than md5
(Ironic's [DEFAULT]hash_ring_algorithm), other partition exponents,
weighted members, and get_nodes with replicas and ignore lists. Run with
Debian's python3-tooz installed:

    /usr/bin/python3 hashring/testdata/gen-tooz-extra.py > hashring/testdata/tooz-extra.json
"""
import json
import random
import uuid

import tooz
from tooz import hashring

rng = random.Random(20261129)


def key():
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def ring_set(hash_function, exponent, members, lookups=200, replicas=(1,), ignores=0):
    ring = hashring.HashRing([], partitions=2 ** exponent, hash_function=hash_function)
    for name, weight in members:
        ring.add_node(name, weight=weight)
    names = [m[0] for m in members]
    out = []
    for _ in range(lookups):
        k = key()
        r = rng.choice(replicas)
        ignore = rng.sample(names, min(ignores, len(names))) if ignores else []
        if ignores and rng.random() < 0.3:
            ignore.append("not-a-member")
        got = ring.get_nodes(k.encode("utf-8"), ignore_nodes=ignore, replicas=r)
        out.append({"key": k, "replicas": r, "ignore": sorted(ignore), "members": sorted(got)})
    return {
        "hash_function": hash_function,
        "partition_exponent": exponent,
        "members": [{"name": n, "weight": w} for n, w in members],
        "lookups": out,
    }


hosts = ["conductor-%02d.example.org" % i for i in range(1, 8)]
sets = []
for fn in ["sha1", "sha224", "sha256", "sha384", "sha512", "sha512_224",
           "sha512_256", "sha3_224", "sha3_256", "sha3_384", "sha3_512"]:
    sets.append(ring_set(fn, 5, [(h, 1) for h in hosts[:5]], lookups=100))
sets.append(ring_set("md5", 3, [(h, 1) for h in hosts[:4]]))
sets.append(ring_set("md5", 8, [(h, 1) for h in hosts[:4]]))
sets.append(ring_set("md5", 5, [("small", 1), ("medium", 2), ("large", 4)], lookups=300))
sets.append(ring_set("md5", 5, [(h, 1) for h in hosts], replicas=(1, 2, 3, 7, 9), ignores=2))
sets.append(ring_set("sha256", 5, [(h, 1) for h in hosts], replicas=(1, 3), ignores=3))
sets.append(ring_set("md5", 5, [("ü-conductor", 1), ("日本", 1), ("plain", 1)]))

print(json.dumps({
    "generator": "tooz.hashring.HashRing (python3-tooz %s) via gen-tooz-extra.py" % tooz.__version__
    if hasattr(tooz, "__version__") else "tooz.hashring.HashRing (python3-tooz 3.1.0) via gen-tooz-extra.py",
    "sets": sets,
}, ensure_ascii=False, separators=(",", ":")))
