#!/usr/bin/env python3
"""A Cloud Storage emulator of the JSON API, for the gs:// store's tests: python3 stdlib, loopback only.

It speaks the documented wire format (cloud.google.com/storage/docs/json_api/v1/objects and the
upload guides) for what quorate and Google's own client use: objects insert (uploadType=media,
multipart and resumable, with the session's 308 Resume Incomplete and Range header),
ifGenerationMatch preconditions, list with prefix/maxResults/pageToken, get (metadata, or alt=media
with Range), delete, bearer tokens, and the API's error JSON; and the metadata server's token of
the VM's service account, which is the token it accepts. tests/gcs/clients_test.js proves it
with @google-cloud/storage.

    emulator.py --listen 127.0.0.1:0 --bucket quorate --token fixed-token
prints "listening on HOST:PORT" once it serves.
"""

import argparse
import base64
import datetime
import email.parser
import hashlib
import json
import re
import secrets
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Store:
    def __init__(self, buckets):
        self.lock = threading.Lock()
        self.buckets = {b: {} for b in buckets}
        self.sessions = {}
        self.generation = 1000


def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%S.%f')[:-3] + 'Z'


class Handler(BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    store = None
    token = None

    def log_message(self, *args):
        pass

    # --- answers -------------------------------------------------------------------------------

    def send(self, status, body=b'', content_type='application/json; charset=UTF-8', headers=()):
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        self.send_response(status)
        self.send_header('Content-Type', content_type)
        self.send_header('Content-Length', str(len(body)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        if self.command != 'HEAD':
            self.wfile.write(body)

    def error(self, status, message, reason):
        self.send(status, {'error': {'code': status, 'message': message,
                                     'errors': [{'message': message, 'domain': 'global', 'reason': reason}]}})

    def resource(self, bucket, name, obj):
        base = f'http://{self.headers.get("Host")}'
        quoted = urllib.parse.quote(name, safe='')
        return {
            'kind': 'storage#object',
            'id': f'{bucket}/{name}/{obj["generation"]}',
            'selfLink': f'{base}/storage/v1/b/{bucket}/o/{quoted}',
            'mediaLink': f'{base}/download/storage/v1/b/{bucket}/o/{quoted}?generation={obj["generation"]}&alt=media',
            'name': name,
            'bucket': bucket,
            'generation': str(obj['generation']),
            'metageneration': '1',
            'contentType': obj['contentType'],
            'storageClass': 'STANDARD',
            'size': str(len(obj['data'])),
            'md5Hash': base64.b64encode(hashlib.md5(obj['data']).digest()).decode(),
            'etag': base64.b64encode(str(obj['generation']).encode()).decode(),
            'timeCreated': obj['updated'],
            'updated': obj['updated'],
        }

    # --- requests ------------------------------------------------------------------------------

    def body(self):
        # Google's client streams multipart uploads with chunked transfer encoding.
        if 'chunked' in (self.headers.get('Transfer-Encoding') or '').lower():
            data = bytearray()
            while True:
                size = int(self.rfile.readline().split(b';')[0].strip() or b'0', 16)
                if size == 0:
                    while self.rfile.readline() not in (b'\r\n', b'\n', b''):
                        pass
                    return bytes(data)
                data += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get('Content-Length') or 0))

    def authorized(self):
        if self.headers.get('Authorization') == f'Bearer {self.token}':
            return True
        self.error(401, 'Invalid Credentials', 'authError')
        return False

    def route(self):
        url = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(url.query, keep_blank_values=True))
        m = re.fullmatch(r'(/upload)?/storage/v1/b/([^/]+)/o(?:/([^/]+))?', url.path)
        if not m:
            return None
        upload, bucket, name = m.group(1), urllib.parse.unquote(m.group(2)), m.group(3)
        return upload is not None, bucket, None if name is None else urllib.parse.unquote(name), query

    def handle_any(self):
        data = self.body()
        if self.path == '/computeMetadata/v1/instance/service-accounts/default/token':
            return self.metadata_token()
        routed = self.route()
        if routed is None:
            return self.error(404, f'Not Found: {self.path}', 'notFound')
        upload, bucket, name, query = routed
        # A resumable session's URI is its own credential: requests to it need no token.
        in_session = upload and query.get('upload_id') in self.store.sessions
        if not in_session and not self.authorized():
            return
        with self.store.lock:
            objects = self.store.buckets.get(bucket)
            if objects is None:
                return self.error(404, 'The specified bucket does not exist.', 'notFound')
            if upload:
                return self.upload(bucket, objects, query, data)
            if name is None and self.command == 'GET':
                return self.list(bucket, objects, query)
            if name is None:
                return self.error(405, 'Method not allowed', 'methodNotAllowed')
            obj = objects.get(name)
            if obj is None:
                return self.error(404, f'No such object: {bucket}/{name}', 'notFound')
            if self.command == 'DELETE':
                del objects[name]
                return self.send(204, b'')
            if self.command == 'GET' and query.get('alt') == 'media':
                return self.media(obj)
            if self.command == 'GET':
                return self.send(200, self.resource(bucket, name, obj))
            return self.error(405, 'Method not allowed', 'methodNotAllowed')

    do_GET = do_POST = do_PUT = do_DELETE = handle_any

    def metadata_token(self):
        """The metadata server's token of the VM's service account, as GCE serves it: the token this
        emulator accepts, so a store on Google's chain is tested without a key."""
        if self.headers.get('Metadata-Flavor') != 'Google':
            return self.send(403, b'Missing Metadata-Flavor:Google header.', 'text/html')
        self.send(200, {'access_token': self.token, 'expires_in': 3599, 'token_type': 'Bearer'},
                  headers=[('Metadata-Flavor', 'Google')])

    def list(self, bucket, objects, query):
        prefix = query.get('prefix', '')
        size = min(int(query.get('maxResults') or 1000), 1000)
        after = base64.urlsafe_b64decode(query['pageToken']).decode() if query.get('pageToken') else None
        names = sorted(n for n in objects if n.startswith(prefix) and (after is None or n > after))
        page, more = names[:size], len(names) > size
        answer = {'kind': 'storage#objects', 'items': [self.resource(bucket, n, objects[n]) for n in page]}
        if more:
            answer['nextPageToken'] = base64.urlsafe_b64encode(page[-1].encode()).decode()
        self.send(200, answer)

    def media(self, obj):
        data = obj['data']
        headers = [('x-goog-generation', str(obj['generation'])),
                   ('x-goog-hash', 'md5=' + base64.b64encode(hashlib.md5(data).digest()).decode()),
                   ('x-goog-stored-content-length', str(len(data)))]
        m = re.fullmatch(r'bytes=(\d+)-(\d*)', self.headers.get('Range') or '')
        if not m:
            return self.send(200, data, obj['contentType'], headers)
        start = int(m.group(1))
        end = min(int(m.group(2)) if m.group(2) else len(data) - 1, len(data) - 1)
        if start >= len(data):
            return self.send(416, b'Request range not satisfiable', 'text/plain',
                             [('Content-Range', f'bytes */{len(data)}')])
        self.send(206, data[start:end + 1], obj['contentType'],
                  headers + [('Content-Range', f'bytes {start}-{end}/{len(data)}')])

    def store_object(self, bucket, objects, name, data, content_type, query):
        if not name:
            return self.error(400, 'Required parameter: name', 'required')
        match = query.get('ifGenerationMatch')
        current = objects.get(name)
        if match is not None and int(match) != (current['generation'] if current else 0):
            return self.error(412, 'At least one of the pre-conditions you specified did not hold.',
                              'conditionNotMet')
        self.store.generation += 1
        objects[name] = {'data': data, 'generation': self.store.generation,
                         'contentType': content_type or 'application/octet-stream', 'updated': now()}
        self.send(200, self.resource(bucket, name, objects[name]))

    def upload(self, bucket, objects, query, data):
        kind = query.get('uploadType')
        if self.command == 'POST' and kind == 'media':
            return self.store_object(bucket, objects, query.get('name'), data, self.headers.get('Content-Type'), query)
        if self.command == 'POST' and kind == 'multipart':
            message = email.parser.BytesParser().parsebytes(
                b'Content-Type: ' + self.headers.get('Content-Type', '').encode() + b'\r\n\r\n' + data)
            parts = message.get_payload() if message.is_multipart() else []
            if len(parts) != 2:
                return self.error(400, 'A multipart upload has a metadata part and a media part', 'invalid')
            meta = json.loads(parts[0].get_payload(decode=True) or b'{}')
            return self.store_object(bucket, objects, meta.get('name') or query.get('name'),
                                     parts[1].get_payload(decode=True), parts[1].get_content_type(), query)
        if self.command == 'POST' and kind == 'resumable':
            meta = json.loads(data or b'{}')
            name = query.get('name') or meta.get('name')
            if not name:
                return self.error(400, 'Required parameter: name', 'required')
            upload_id = secrets.token_urlsafe(24)
            self.store.sessions[upload_id] = {'bucket': bucket, 'name': name, 'data': bytearray(), 'query': query,
                                              'type': self.headers.get('X-Upload-Content-Type')
                                              or meta.get('contentType')}
            location = (f'http://{self.headers.get("Host")}/upload/storage/v1/b/{bucket}/o?uploadType=resumable'
                        f'&name={urllib.parse.quote(name, safe="")}&upload_id={upload_id}')
            return self.send(200, b'', headers=[('Location', location), ('X-GUploader-UploadID', upload_id)])
        session = self.store.sessions.get(query.get('upload_id', ''))
        if session is None or session['bucket'] != bucket:
            return self.error(404, 'No such upload session', 'notFound')
        if self.command == 'DELETE':
            del self.store.sessions[query['upload_id']]
            return self.send(499, b'', 'text/plain')
        if self.command != 'PUT':
            return self.error(405, 'Method not allowed', 'methodNotAllowed')
        m = re.fullmatch(r'bytes (?:(\d+)-(\d+)|\*)/(\d+|\*)', self.headers.get('Content-Range') or 'bytes */*')
        if not m:
            return self.error(400, 'Bad Content-Range', 'invalid')
        held = session['data']
        if m.group(1) is not None:
            start, end = int(m.group(1)), int(m.group(2))
            if start > len(held) or end - start + 1 != len(data):
                return self.error(400, f'Content-Range {start}-{end} does not follow byte {len(held)}', 'invalid')
            held += data[len(held) - start:]
        total = None if m.group(3) == '*' else int(m.group(3))
        if total is not None and total == len(held):
            del self.store.sessions[query['upload_id']]
            return self.store_object(bucket, objects, session['name'], bytes(held), session['type'], session['query'])
        if total is not None and total < len(held):
            return self.error(400, f'Upload of {len(held)} bytes is larger than its total {total}', 'invalid')
        headers = [('Range', f'bytes=0-{len(held) - 1}')] if held else []
        self.send(308, b'', 'text/plain', headers)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--listen', default='127.0.0.1:0')
    parser.add_argument('--bucket', action='append', default=[])
    parser.add_argument('--token', required=True)
    args = parser.parse_args()
    host, port = args.listen.rsplit(':', 1)
    if not host.startswith('127.'):
        sys.exit(f'emulator.py: --listen {args.listen}: loopback addresses only')
    Handler.store = Store(args.bucket or ['quorate'])
    Handler.token = args.token
    server = ThreadingHTTPServer((host, int(port)), Handler)
    server.daemon_threads = True
    print(f'listening on {host}:{server.server_address[1]}', flush=True)
    server.serve_forever()


if __name__ == '__main__':
    main()
