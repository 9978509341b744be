// Validates every Kubernetes object under k8s/ against the real API schemas (npm kubernetes-models,
// generated from Kubernetes' OpenAPI), and every kustomization's resources against the tree, the way
// `kubectl apply -k` would read them. Prints one line per object; exits 1 on the first bad file and
// names the field at fault.
//   node validate.mjs K8S_DIR
import { readFileSync, readdirSync, statSync, existsSync } from "node:fs";
import { join, relative, dirname } from "node:path";
import { parseAllDocuments } from "yaml";

const root = process.argv[2];
if (!root) {
  console.error("usage: node validate.mjs K8S_DIR");
  process.exit(2);
}

// apiVersion "apps/v1" → module kubernetes-models/apps/v1; the core group "v1" → kubernetes-models/v1.
async function modelFor(apiVersion, kind) {
  const mod = await import(`kubernetes-models/${apiVersion}`).catch(() => null);
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
for (const file of yamlFiles(root)) {
  const where = relative(root, file);
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
