// Azure's official JavaScript clients (@azure/identity, @azure/arm-network, @azure/arm-compute)
// against tests/azure/emulator.py: a client secret exchanged at the emulator's token endpoint, then
// every page of the calls the azure provider makes. Prints what the clients parsed as one JSON
// document, which emulator_test.py compares with what the emulator holds. Any error the clients
// raise (a shape they cannot read, a refused token) ends this with exit 1.
// Environment: AZURE_EMULATOR (https://127.0.0.1:PORT), AZURE_TENANT, AZURE_CLIENT_ID,
// AZURE_CLIENT_SECRET, AZURE_SUBSCRIPTION, AZURE_RESOURCE_GROUP, AZURE_SCALE_SET (Uniform),
// AZURE_FLEX_SCALE_SET (Flexible), and
// NODE_EXTRA_CA_CERTS naming the emulator's CA.
import { ClientSecretCredential } from "@azure/identity";
import { NetworkManagementClient } from "@azure/arm-network";
import { ComputeManagementClient } from "@azure/arm-compute";

const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
};

const endpoint = env("AZURE_EMULATOR");
const credential = new ClientSecretCredential(env("AZURE_TENANT"), env("AZURE_CLIENT_ID"), env("AZURE_CLIENT_SECRET"), {
  authorityHost: endpoint,
  // Instance discovery asks login.microsoftonline.com whether the authority is a known cloud.
  disableInstanceDiscovery: true,
});
const subscription = env("AZURE_SUBSCRIPTION");
const rg = env("AZURE_RESOURCE_GROUP");
const vmss = env("AZURE_SCALE_SET");
const options = { endpoint, retryOptions: { maxRetries: 5 } };
const network = new NetworkManagementClient(credential, subscription, options);
const compute = new ComputeManagementClient(credential, subscription, options);

const nic = (n) => ({
  id: n.id,
  vm: n.virtualMachine?.id ?? null,
  primary: n.primary ?? null,
  ip: (n.ipConfigurations ?? []).find((c) => c.primary)?.privateIPAddress ?? null,
  tags: n.tags ?? {},
});

const out = { nics: [], scaleSetNics: [], vms: [], capacity: null, pages: {} };
// byPage() counts the pages, so the test sees that nextLink was followed.
out.pages.nics = 0;
for await (const page of network.networkInterfaces.listAll().byPage()) {
  out.pages.nics++;
  for (const n of page) out.nics.push(nic(n));
}
out.pages.scaleSetNics = 0;
for await (const page of network.networkInterfaces.listVirtualMachineScaleSetNetworkInterfaces(rg, vmss).byPage()) {
  out.pages.scaleSetNics++;
  for (const n of page) out.scaleSetNics.push(nic(n));
}
out.pages.vms = 0;
for await (const page of compute.virtualMachineScaleSetVMs.list(rg, vmss, { expand: "instanceView" }).byPage()) {
  out.pages.vms++;
  for (const vm of page) {
    out.vms.push({
      id: vm.id,
      computerName: vm.osProfile?.computerName ?? null,
      provisioningState: vm.provisioningState ?? null,
      power: (vm.instanceView?.statuses ?? []).map((s) => s.code).find((c) => c?.startsWith("PowerState/")) ?? null,
    });
  }
}
const set = await compute.virtualMachineScaleSets.get(rg, vmss);
out.capacity = set.sku?.capacity ?? null;

// A Flexible set: its resource group's VMs filtered by the set, with the instance view, and the
// group's NICs.
const flex = await compute.virtualMachineScaleSets.get(rg, env("AZURE_FLEX_SCALE_SET"));
out.flex = { mode: flex.orchestrationMode ?? null, capacity: flex.sku?.capacity ?? null, vms: [], nics: [] };
const filter = `virtualMachineScaleSet/id eq '${flex.id}'`;
for await (const vm of compute.virtualMachines.list(rg, { filter, expand: "instanceView" })) {
  out.flex.vms.push({
    id: vm.id,
    set: vm.virtualMachineScaleSet?.id ?? null,
    computerName: vm.osProfile?.computerName ?? null,
    power: (vm.instanceView?.statuses ?? []).map((s) => s.code).find((c) => c?.startsWith("PowerState/")) ?? null,
  });
}
for await (const n of network.networkInterfaces.list(rg)) out.flex.nics.push(nic(n));
console.log(JSON.stringify(out));
