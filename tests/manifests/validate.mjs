// Validates every Kubernetes object in the YAML files under a directory against the real API schemas
// (npm kubernetes-models, generated from Kubernetes' OpenAPI; cert-manager's and the Prometheus
// operator's from their CRDs), and every kustomization's resources against the tree, the way
// `kubectl apply -k` would read them. Prints one line per object; exits 1 if any is bad and names
// the field at fault.
//   node validate.mjs DIR...
import { readFileSync, readdirSync, statSync, existsSync } from "node:fs";
import { join, relative, dirname, basename } from "node:path";
import { parseAllDocuments } from "yaml";

const roots = process.argv.slice(2);
if (!roots.length) {
  console.error("usage: node validate.mjs DIR...");
  process.exit(2);
}

// apiVersion "apps/v1" → module kubernetes-models/apps/v1; the core group "v1" → kubernetes-models/v1;
// the CRDs the chart creates → their own packages.
const crdPackages = {
  "cert-manager.io": "@kubernetes-models/cert-manager",
  "monitoring.coreos.com": "@kubernetes-models/prometheus-operator",
};
async function modelFor(apiVersion, kind) {
  const pkg = crdPackages[apiVersion.split("/")[0]] ?? "kubernetes-models";
  const mod = await import(`${pkg}/${apiVersion}`).catch(() => null);
  return mod?.[kind] ?? null;
}

function yamlFiles(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return yamlFiles(path);
    return /\.ya?ml$/.test(name) ? [path] : [];
  });
}

let objects = 0;
const problems = [];
for (const [root, file] of roots.flatMap((root) => yamlFiles(root).map((file) => [root, file]))) {
  const where = join(basename(root), relative(root, file));
  const docs = parseAllDocuments(readFileSync(file, "utf8"));
  for (const doc of docs) {
    if (doc.errors.length) {
      problems.push(`${where}: not valid YAML: ${doc.errors[0].message}`);
      continue;
    }
    const obj = doc.toJS();
    if (obj === null) continue;
    if (obj.kind === "Kustomization") {
      for (const res of obj.resources ?? []) {
        if (!existsSync(join(dirname(file), res))) problems.push(`${where}: resource ${res} does not exist`);
      }
      console.log(`ok   ${where}: Kustomization (${(obj.resources ?? []).length} resources)`);
      continue;
    }
    const Model = await modelFor(obj.apiVersion, obj.kind);
    if (!Model) {
      problems.push(`${where}: no schema for apiVersion ${obj.apiVersion} kind ${obj.kind}`);
      continue;
    }
    try {
      new Model(obj).validate();
      objects++;
      console.log(`ok   ${where}: ${obj.kind} ${obj.metadata?.name}`);
    } catch (e) {
      const detail = (e.errors ?? []).map((x) => `${x.instancePath || "/"} ${x.message}`).join("; ");
      problems.push(`${where}: ${obj.kind} ${obj.metadata?.name}: ${detail || e.message}`);
    }
  }
}
for (const p of problems) console.error(`FAIL ${p}`);
console.log(`${objects} objects valid, ${problems.length} problems`);
process.exit(problems.length ? 1 : 0);
