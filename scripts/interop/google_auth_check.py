"""Google's own google-auth library against `bucketfs serve --require-oauth`.

It obtains a token from the emulator's token endpoint with a service account key file whose
token_uri points there (proving the endpoint speaks the real JWT bearer protocol), then uses it
with google-cloud-storage; an anonymous client must be refused. Every result is checked.
Usage: google_auth_check.py KEY_FILE ENDPOINT
"""
import sys

import google.auth.exceptions
import google.auth.transport.requests
from google.api_core import exceptions
from google.api_core.client_options import ClientOptions
from google.cloud import storage
from google.oauth2 import service_account


def check(condition, what):
    if not condition:
        raise AssertionError(what)
    print(f"  ok: {what}")


def main():
    key_file, endpoint = sys.argv[1], sys.argv[2]
    creds = service_account.Credentials.from_service_account_file(
        key_file, scopes=["https://www.googleapis.com/auth/devstorage.read_write"])
    creds.refresh(google.auth.transport.requests.Request())
    check(bool(creds.token) and creds.expiry is not None, "google-auth got a token from the emulator's token endpoint")
    client = storage.Client(project="interop", credentials=creds, client_options=ClientOptions(api_endpoint=endpoint))
    blob = client.bucket("auth-bucket").blob("from-python.txt")
    blob.upload_from_string(b"uploaded with a google-auth token\n")
    check(blob.download_as_bytes() == b"uploaded with a google-auth token\n", "google-cloud-storage with that token: upload and download")
    anonymous = storage.Client(
        project="interop", credentials=google.auth.credentials.AnonymousCredentials(),
        client_options=ClientOptions(api_endpoint=endpoint))
    try:
        anonymous.bucket("auth-bucket").blob("from-python.txt").download_as_bytes()
        raise AssertionError("an anonymous client read from a server that requires OAuth")
    except (exceptions.Unauthorized, google.auth.exceptions.InvalidOperation):
        # google-auth answers the server's 401 by trying to refresh anonymous credentials.
        print("  ok: an anonymous client is refused (401)")


if __name__ == "__main__":
    main()
