"""Prints botocore's SigV4 signatures of the requests shared/rest/src/auth.rs's tests sign,
so that lakemirror's signer is checked against the one pyiceberg signs REST requests with
(botocore's SigV4Auth), not against itself. Run: python tests/rig/sigv4_vector.py"""

import datetime
import hashlib
from unittest import mock

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

CREDENTIALS = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")


def authorization(method, url, body, service, region, when):
    request = AWSRequest(method=method, url=url, data=body)
    request.headers["X-Amz-Content-SHA256"] = hashlib.sha256(body).hexdigest()
    with mock.patch("botocore.auth.get_current_datetime", return_value=when):
        SigV4Auth(CREDENTIALS, service, region).add_auth(request)
    return request.headers["Authorization"]


if __name__ == "__main__":
    print("post-vanilla:", authorization(
        "POST", "https://example.amazonaws.com/", b"", "service", "us-east-1",
        datetime.datetime(2015, 8, 30, 12, 36, 0)))
    print("glue commit:", authorization(
        "POST",
        "https://glue.us-east-1.amazonaws.com/iceberg/v1/catalogs/123456789012/namespaces/db/tables/t",
        b'{"requirements":[],"updates":[]}', "glue", "us-east-1",
        datetime.datetime.fromtimestamp(1_700_000_000, datetime.timezone.utc).replace(tzinfo=None)))
