#!/usr/bin/env python3
"""Cross-check asym_vectors.json with an independent implementation.

pyca/cryptography (OpenSSL underneath) verifies the ECDSA-P256, RSA-PSS-SHA256
and ML-DSA signatures (the ML-DSA-65 half of the hybrids too) and re-derives
each ML-DSA public key from the FIPS 204 seed that our key files store.
Not run by CI (it needs cryptography >= 47); run by hand from this directory:
python3 interop_check.py
"""
import base64
import hashlib
import json
import struct

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, mldsa, padding
from cryptography.hazmat.primitives.serialization import load_der_public_key

MLDSA = {
    "ML-DSA-44": (mldsa.MLDSA44PublicKey, mldsa.MLDSA44PrivateKey),
    "ML-DSA-65": (mldsa.MLDSA65PublicKey, mldsa.MLDSA65PrivateKey),
    "ML-DSA-87": (mldsa.MLDSA87PublicKey, mldsa.MLDSA87PrivateKey),
}


def first_component(b):
    (n,) = struct.unpack(">I", b[:4])
    return b[4 : 4 + n]


def main():
    checked = 0
    for v in json.load(open("asym_vectors.json")):
        alg = v["algorithm"]
        pub = base64.b64decode(v["public_key_file"]["public"])
        value = base64.b64decode(json.loads(v["signed_envelope"])["result"]["signature"]["value"])
        msg = v["signed_input"].encode()
        if alg == "ECDSA-P256":
            load_der_public_key(pub).verify(value, msg, ec.ECDSA(hashes.SHA256()))
        elif alg == "RSA-PSS-SHA256":
            pss = padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=32)
            load_der_public_key(pub).verify(value, msg, pss, hashes.SHA256())
        elif alg.startswith("ML-DSA-65+"):
            MLDSA["ML-DSA-65"][0].from_public_bytes(first_component(pub)).verify(first_component(value), msg)
        elif alg in MLDSA:
            MLDSA[alg][0].from_public_bytes(pub).verify(value, msg)
            seed = hashlib.shake_256(("acsledger asymmetric vectors: " + alg).encode()).digest(32)
            derived = MLDSA[alg][1].from_seed_bytes(seed).public_key().public_bytes(
                serialization.Encoding.Raw, serialization.PublicFormat.Raw)
            assert derived == pub, alg + ": seed does not derive the vector's public key"
        else:
            continue  # SLH-DSA: not in pyca/cryptography
        print("ok", alg)
        checked += 1
    assert checked == 7, checked


if __name__ == "__main__":
    main()
