// Google's own Cloud Storage client (@google-cloud/storage) against tests/gcs/emulator.py: a simple
// and a multipart insert with ifGenerationMatch=0 (a second one refused with 412), a resumable upload
// in several chunks, a ranged and a whole download, a listing read page by page, a delete, and the
// error answers (a missing object, a missing bucket, a wrong token). If the emulator's paths, JSON,
// session protocol or headers were not the real service's, this client would fail or read other
// data: the emulator the gs:// store is tested against speaks what Google speaks.
// Exit 77 (skipped) when scripts/deps has not installed the client.
'use strict';
const assert = require('assert');
const fs = require('fs');
const path = require('path');
const {spawn} = require('child_process');

if (!fs.existsSync(path.join(__dirname, 'node_modules', '@google-cloud', 'storage'))) {
  console.log('skip: tests/gcs/node_modules is missing (run scripts/deps)');
  process.exit(77);
}

const TOKEN = 'fixed-token';

function startEmulator() {
  const child = spawn('python3', [path.join(__dirname, 'emulator.py'), '--listen', '127.0.0.1:0', '--bucket', 'quorate',
    '--token', TOKEN], {stdio: ['ignore', 'pipe', 'inherit']});
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/listening on (\S+)/);
      if (m) resolve({child, base: `http://${m[1]}`});
    });
    child.on('exit', (code) => reject(new Error(`the emulator exited with ${code}`)));
  });
}

function client(base, token) {
  const {Storage} = require('@google-cloud/storage');
  const {OAuth2Client} = require('google-auth-library');
  const authClient = new OAuth2Client();
  authClient.setCredentials({access_token: token, expiry_date: Date.now() + 3600 * 1000});
  // useAuthWithCustomEndpoint: the token goes to the emulator too, so its check is proven.
  return new Storage({apiEndpoint: base, projectId: 'quorate-test', authClient, useAuthWithCustomEndpoint: true,
    retryOptions: {autoRetry: false}});
}

async function rejects(promise, code) {
  await assert.rejects(promise, (err) => {
    assert.strictEqual(err.code, code, `want HTTP ${code}, got ${err.code}: ${err.message}`);
    return true;
  });
}

async function run(base) {
  const bucket = client(base, TOKEN).bucket('quorate');

  // Validation by MD5, which the emulator's md5Hash and x-goog-hash carry (the service gives CRC32C
  // too; in pure Python it would cost a second a MiB).
  const a = bucket.file('p/a');
  await a.save('one', {resumable: false, validation: 'md5', preconditionOpts: {ifGenerationMatch: 0}});
  await rejects(a.save('two', {resumable: false, validation: 'md5', preconditionOpts: {ifGenerationMatch: 0}}), 412);
  assert.strictEqual((await a.download())[0].toString(), 'one');
  const [meta] = await a.getMetadata();
  assert.strictEqual(meta.size, '3');
  assert.strictEqual(meta.name, 'p/a');

  // Three chunks of 256 KiB and a short last one: the session's 308s and Range headers read right.
  const big = Buffer.alloc(3 * 256 * 1024 + 1000);
  for (let i = 0; i < big.length; i++) big[i] = (i * 7 + (i >> 10)) & 0xff;
  // The session is begun by createResumableUpload: the client's save() begins one without the token
  // when the endpoint is not Google's, whatever useAuthWithCustomEndpoint says (7.22.0).
  const [uri] = await bucket.file('p/big').createResumableUpload();
  assert.ok(uri.includes('upload_id='), `a session URI: ${uri}`);
  await bucket.file('p/big').save(big, {uri, resumable: true, chunkSize: 256 * 1024, validation: 'md5'});
  const [whole] = await bucket.file('p/big').download({validation: 'md5'});
  assert.ok(whole.equals(big), 'the resumable upload came back whole');
  const [slice] = await bucket.file('p/big').download({start: 262000, end: 262999, validation: false});
  assert.ok(slice.equals(big.subarray(262000, 263000)), 'a ranged read is the range');

  for (const name of ['p/b', 'p/c', 'p/d', 'q/x']) await bucket.file(name).save(name, {resumable: false, validation: 'md5'});
  const [all] = await bucket.getFiles({prefix: 'p/'});
  assert.deepStrictEqual(all.map((f) => f.name), ['p/a', 'p/b', 'p/big', 'p/c', 'p/d']);
  const [first, next] = await bucket.getFiles({prefix: 'p/', maxResults: 2, autoPaginate: false});
  assert.deepStrictEqual(first.map((f) => f.name), ['p/a', 'p/b']);
  assert.ok(next && next.pageToken, 'a page that is not the last carries a pageToken');
  const [second, last] = await bucket.getFiles({prefix: 'p/', maxResults: 2, autoPaginate: false,
    pageToken: next.pageToken});
  assert.deepStrictEqual(second.map((f) => f.name), ['p/big', 'p/c']);
  const [third, after] = await bucket.getFiles({prefix: 'p/', maxResults: 2, autoPaginate: false,
    pageToken: last.pageToken});
  assert.deepStrictEqual(third.map((f) => f.name), ['p/d']);
  assert.strictEqual(after, null, 'the last page carries no pageToken');

  await bucket.file('p/b').delete();
  assert.strictEqual((await bucket.file('p/b').exists())[0], false);
  await rejects(bucket.file('p/b').delete(), 404);
  await rejects(bucket.file('p/missing').download(), 404);
  await rejects(client(base, TOKEN).bucket('nosuchbucket').file('k').save('x', {resumable: false, validation: 'md5'}), 404);
  await rejects(client(base, 'wrong-token').bucket('quorate').file('p/a').download(), 401);
  console.log('ok: @google-cloud/storage reads and writes the emulator as Cloud Storage');
}

async function main() {
  const {child, base} = await startEmulator();
  try {
    await run(base);
  } finally {
    child.kill();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
