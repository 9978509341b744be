// Google's own clients against tests/gce/emulator.py: @googleapis/compute (aggregatedList paged,
// zone list, instanceGroupManagers.get, regionInstanceGroupManagers.get, an error answer) and
// gcp-metadata (project-id, the service account's token, the created-by attribute). If the
// emulator's JSON, paths, paging or headers were not the real services', these clients would fail or
// read other data: the emulator the gce provider is tested against speaks what Google speaks.
// Exit 77 (skipped) when scripts/deps has not installed the clients.
'use strict';
const assert = require('assert');
const fs = require('fs');
const path = require('path');
const {spawn} = require('child_process');

if (!fs.existsSync(path.join(__dirname, 'node_modules', '@googleapis', 'compute'))) {
  console.log('skip: tests/gce/node_modules is missing (run scripts/deps)');
  process.exit(77);
}

const PROJECT = 'quorate-test';

function startEmulator() {
  const child = spawn('python3', [path.join(__dirname, 'emulator.py'), '--listen', '127.0.0.1:0', '--project', PROJECT,
    '--token', 'fixed-token'], {stdio: ['ignore', 'pipe', 'inherit']});
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

async function control(base, method, what, body) {
  const r = await fetch(`${base}/_emulator/${what}`, {method, body: JSON.stringify(body || {})});
  assert.strictEqual(r.status, 200, `${method} ${what}: ${await r.text()}`);
}

async function main() {
  const {child, base} = await startEmulator();
  try {
    await run(base);
  } finally {
    child.kill();
  }
}

async function run(base) {
  const host = base.replace('http://', '');
  process.env.GCE_METADATA_HOST = host;
  const {compute, auth} = require('@googleapis/compute');
  const gcpMetadata = require('gcp-metadata');

  await control(base, 'POST', 'migs', {name: 'etcd', zone: 'us-central1-a', target_size: 3});
  await control(base, 'POST', 'migs', {name: 'etcd-r', region: 'us-central1', target_size: 5});
  const want = {};
  const zones = ['us-central1-a', 'us-central1-a', 'us-central1-b', 'us-central1-c', 'us-central1-c'];
  for (let i = 1; i <= 5; i++) {
    const inst = {name: `etcd-${i}`, zone: zones[i - 1], ip: `127.0.0.${10 + i}`, status: i === 5 ? 'STOPPED' : 'RUNNING',
      tags: ['etcd'], labels: {role: 'etcd'}, mig: i <= 2 ? 'etcd' : 'etcd-r'};
    await control(base, 'POST', 'instances', inst);
    want[inst.name] = inst;
  }
  await control(base, 'POST', 'instances', {name: 'web-1', zone: 'us-central1-b', ip: '127.0.0.30', labels: {role: 'web'}});
  await control(base, 'POST', 'config', {max_page: 2});

  // A fixed token, as the provider's tests give one: an OAuth2 client holding it.
  const client = new auth.OAuth2();
  client.setCredentials({access_token: 'fixed-token', expiry_date: Date.now() + 3600 * 1000});
  const c = compute({version: 'v1', auth: client, rootUrl: `${base}/`});

  // aggregatedList, page by page, with the filter forms the provider sends.
  for (const filter of ['labels.role = "etcd"', '(tags.items = "etcd") AND (labels.role = "etcd")', 'labels.role:*']) {
    const seen = {};
    let pageToken;
    let pages = 0;
    do {
      const res = await c.instances.aggregatedList({project: PROJECT, filter, maxResults: 500, pageToken,
        returnPartialSuccess: true});
      pages++;
      assert.strictEqual(res.data.kind, 'compute#instanceAggregatedList');
      for (const [scope, scoped] of Object.entries(res.data.items)) {
        assert.ok(scope.startsWith('zones/'), scope);
        if (!scoped.instances) {
          assert.strictEqual(scoped.warning.code, 'NO_RESULTS_ON_PAGE');
          continue;
        }
        for (const i of scoped.instances) {
          seen[i.name] = {zone: i.zone.split('/').pop(), ip: i.networkInterfaces[0].networkIP, status: i.status,
            createdBy: i.metadata.items.find((m) => m.key === 'created-by')?.value};
        }
      }
      pageToken = res.data.nextPageToken;
    } while (pageToken);
    const expected = filter === 'labels.role:*' ? 6 : 5;
    assert.strictEqual(Object.keys(seen).length, expected, `${filter}: ${JSON.stringify(seen)}`);
    assert.strictEqual(pages, Math.ceil(expected / 2), `${filter}: ${pages} pages`);
    for (const [name, inst] of Object.entries(want)) {
      assert.deepStrictEqual([seen[name].zone, seen[name].ip, seen[name].status], [inst.zone, inst.ip, inst.status]);
      assert.match(seen[name].createdBy, new RegExp(`^projects/\\d+/(zones|regions)/us-central1(-a)?/instanceGroupManagers/${inst.mig}$`));
    }
  }
  // One zone's list pages the same way.
  const zoneList = await c.instances.list({project: PROJECT, zone: 'us-central1-c', maxResults: 1});
  assert.strictEqual(zoneList.data.items.length, 1);
  assert.ok(zoneList.data.nextPageToken);

  // The groups' sizes.
  const igm = await c.instanceGroupManagers.get({project: PROJECT, zone: 'us-central1-a', instanceGroupManager: 'etcd'});
  assert.strictEqual(igm.data.targetSize, 3);
  assert.strictEqual(igm.data.kind, 'compute#instanceGroupManager');
  const rigm = await c.regionInstanceGroupManagers.get({project: PROJECT, region: 'us-central1',
    instanceGroupManager: 'etcd-r'});
  assert.strictEqual(rigm.data.targetSize, 5);

  // A refusal in Google's error shape, as the client reads it.
  await control(base, 'POST', 'config', {deny: ['compute.instanceGroupManagers.get']});
  await assert.rejects(c.instanceGroupManagers.get({project: PROJECT, zone: 'us-central1-a', instanceGroupManager: 'etcd'}),
    (e) => e.response.status === 403 && e.response.data.error.errors[0].reason === 'forbidden' &&
      /compute\.instanceGroupManagers\.get/.test(e.message));
  await control(base, 'POST', 'config', {deny: []});

  // The metadata server, as gcp-metadata reads it (it insists on Metadata-Flavor: Google).
  assert.strictEqual(await gcpMetadata.project('project-id'), PROJECT);
  await control(base, 'POST', 'config', {created_by: 'projects/123456789012/zones/us-central1-a/instanceGroupManagers/etcd'});
  assert.strictEqual(await gcpMetadata.instance('attributes/created-by'),
    'projects/123456789012/zones/us-central1-a/instanceGroupManagers/etcd');
  const token = await gcpMetadata.instance('service-accounts/default/token');
  assert.strictEqual(token.token_type, 'Bearer');
  assert.ok(token.expires_in > 0);
  // The metadata server's token opens the Compute API.
  const viaMetadata = new auth.OAuth2();
  viaMetadata.setCredentials({access_token: token.access_token, expiry_date: Date.now() + token.expires_in * 1000});
  const c2 = compute({version: 'v1', auth: viaMetadata, rootUrl: `${base}/`});
  const mine = await c2.instanceGroupManagers.get({project: PROJECT, zone: 'us-central1-a', instanceGroupManager: 'etcd'});
  assert.strictEqual(mine.data.targetSize, 3);

  // What the clients sent is what the emulator checks: the bearer token on every Compute call.
  const r = await fetch(`${base}/_emulator/requests`);
  const log = await r.json();
  const computeCalls = log.filter((e) => e.path.startsWith('/compute/'));
  assert.ok(computeCalls.length >= 10 && computeCalls.every((e) => e.authorized), JSON.stringify(computeCalls));
  assert.ok(computeCalls.some((e) => e.query.pageToken), 'no call carried a pageToken');
  console.log(`ok: ${computeCalls.length} Compute calls and the metadata server read by Google's clients`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
