"""The official google-cloud-storage client against `bucketfs serve` (GCS JSON API).

Every result is checked; any failure raises and exits non-zero. Run by scripts/interop.sh with
STORAGE_EMULATOR_HOST pointing at the emulator on 127.0.0.1.
"""
import hashlib
import os
import sys

from google.api_core import exceptions
from google.cloud import storage


def check(condition, what):
    if not condition:
        raise AssertionError(what)
    print(f"  ok: {what}")


def main():
    client = storage.Client.create_anonymous_client()
    client.project = "interop"
    bucket = client.bucket("py-bucket")

    # Simple upload, then a forced resumable one (chunk_size set).
    small = b"hello from google-cloud-storage\n"
    blob = bucket.blob("docs/hello.txt")
    blob.upload_from_string(small, content_type="text/plain")
    check(blob.generation is not None and int(blob.generation) > 0, "simple upload returns a generation")
    big = os.urandom(3 * 1024 * 1024 + 123)
    resumable = bucket.blob("data/big.bin", chunk_size=256 * 1024)
    resumable.upload_from_string(big, content_type="application/octet-stream")
    check(resumable.size == len(big), "resumable upload stored every byte")

    for i in range(12):
        bucket.blob(f"page/item-{i:02d}.txt").upload_from_string(f"item {i}".encode())
    bucket.blob("page/sub/deeper.txt").upload_from_string(b"deep")

    # Listing: prefix, delimiter, pagination.
    iterator = client.list_blobs("py-bucket", prefix="page/", delimiter="/", page_size=5)
    names, pages = [], 0
    for page in iterator.pages:
        pages += 1
        names.extend(b.name for b in page)
    check(names == [f"page/item-{i:02d}.txt" for i in range(12)], "list with prefix and delimiter returns the items")
    check(pages >= 3, f"pagination really pages ({pages} pages of 5)")
    check(set(iterator.prefixes) == {"page/sub/"}, "delimiter folds deeper names into prefixes")
    everything = [b.name for b in client.list_blobs("py-bucket")]
    check(len(everything) == 15, "an unfiltered list sees every object")

    # Downloads: whole and ranged; hashes match what was sent.
    got = bucket.blob("data/big.bin").download_as_bytes()
    check(hashlib.sha256(got).digest() == hashlib.sha256(big).digest(), "whole download matches (SHA-256)")
    part = bucket.blob("data/big.bin").download_as_bytes(start=1000, end=1999)
    check(part == big[1000:2000], "ranged download returns exactly the range")
    tail = bucket.blob("data/big.bin").download_as_bytes(start=len(big) - 10)
    check(tail == big[-10:], "open-ended range returns the tail")

    # Metadata get and patch.
    meta = bucket.get_blob("docs/hello.txt")
    check(meta.size == len(small) and meta.content_type == "text/plain", "metadata has size and content type")
    check(meta.md5_hash == __import__("base64").b64encode(hashlib.md5(small).digest()).decode(), "md5Hash is the MD5 of the bytes")
    check(meta.crc32c is not None, "crc32c is reported")
    before = int(meta.metageneration)
    meta.metadata = {"owner": "interop"}
    meta.cache_control = "max-age=30"
    meta.patch()
    again = bucket.get_blob("docs/hello.txt")
    check(again.metadata.get("owner") == "interop", "patched custom metadata is stored")
    check(again.cache_control == "max-age=30", "patched cacheControl is stored")
    check(int(again.metageneration) == before + 1, "patch bumps the metageneration")

    # Preconditions: if_generation_match fails with 412.
    try:
        bucket.blob("docs/hello.txt").upload_from_string(b"x", if_generation_match=0)
        raise AssertionError("if_generation_match=0 on an existing object must fail")
    except exceptions.PreconditionFailed:
        check(True, "if_generation_match=0 on an existing object fails with 412")
    try:
        bucket.blob("docs/hello.txt").upload_from_string(b"x", if_generation_match=int(again.generation) + 1)
        raise AssertionError("a wrong if_generation_match must fail")
    except exceptions.PreconditionFailed:
        check(True, "a wrong if_generation_match fails with 412")
    bucket.blob("docs/hello.txt").upload_from_string(b"replaced", if_generation_match=int(again.generation))
    check(bucket.blob("docs/hello.txt").download_as_bytes() == b"replaced", "a matching if_generation_match succeeds")
    bucket.blob("docs/new.txt").upload_from_string(b"new", if_generation_match=0)
    check(bucket.get_blob("docs/new.txt") is not None, "if_generation_match=0 creates a missing object")

    # Delete.
    bucket.blob("docs/new.txt").delete()
    check(bucket.get_blob("docs/new.txt") is None, "a deleted object is gone")
    try:
        bucket.blob("docs/new.txt").delete()
        raise AssertionError("deleting a missing object must fail")
    except exceptions.NotFound:
        check(True, "deleting a missing object is 404")
    print("google-cloud-storage against bucketfs serve: all checks passed")


if __name__ == "__main__":
    try:
        main()
    except Exception as error:  # noqa: BLE001 - report and fail
        print(f"FAILED: {error!r}", file=sys.stderr)
        sys.exit(1)
