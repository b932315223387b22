// The floor for the node proxy's added latency: the least a Node gRPC hop can do. A CRI image service on
// @grpc/grpc-js that forwards every call's bytes to the runtime with the proxy's own client (RuntimeImageClient),
// deadline and metadata included, and returns the answer: no decisions, no records, no metrics, no logging, and
// grpc-js's own unix-socket listener instead of the proxy's connection wrapper (unix-authority.ts).
//
//   node bench/support/grpc-forwarder.ts --listen unix:///PATH --runtime-endpoint unix:///SOCKET
//
// Runs until SIGTERM or SIGINT.
import { parseArgs } from "node:util";
import * as grpc from "@grpc/grpc-js";
import { CHANNEL_OPTIONS, CRI_PACKAGES, IMAGE_METHODS, imageServiceDefinition, RuntimeImageClient } from "../../src/cri/image-service-proxy.ts";

const { values } = parseArgs({ options: { listen: { type: "string" }, "runtime-endpoint": { type: "string" } }, strict: true });
if (!values.listen || !values["runtime-endpoint"]) {
  process.stderr.write("usage: grpc-forwarder.ts --listen unix:///PATH --runtime-endpoint unix:///SOCKET\n");
  process.exit(2);
}
const runtime = new RuntimeImageClient(values["runtime-endpoint"]);
const server = new grpc.Server(CHANNEL_OPTIONS);
for (const pkg of CRI_PACKAGES) {
  const implementation: grpc.UntypedServiceImplementation = {};
  for (const method of IMAGE_METHODS) {
    implementation[method] = ((call: grpc.ServerUnaryCall<Buffer, Buffer>, callback: grpc.sendUnaryData<Buffer>) => {
      runtime.call(pkg, method, call.request, { deadline: call.getDeadline(), metadata: call.metadata.clone() }).then(
        (response) => callback(null, response),
        (err: grpc.ServiceError) => callback(err),
      );
    }) as grpc.handleUnaryCall<Buffer, Buffer>;
  }
  server.addService(imageServiceDefinition(pkg), implementation);
}
server.bindAsync(values.listen, grpc.ServerCredentials.createInsecure(), (err) => {
  if (err) {
    process.stderr.write(`grpc-forwarder: ${err.message}\n`);
    process.exit(1);
  }
});
const stop = () => {
  server.forceShutdown();
  runtime.close();
};
process.once("SIGTERM", stop);
process.once("SIGINT", stop);
