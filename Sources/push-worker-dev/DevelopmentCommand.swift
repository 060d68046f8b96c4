import ArgumentParser
import Logging
import PushDevelopmentTools
import PushWorker

/// The development tools, kept out of the production executable (`push-worker`) and its image.
@main
struct PushWorkerDevCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "push-worker-dev",
        abstract: "push-worker's development tools: the demo, the benchmarks, the provider sandboxes and the Kafka mock cluster.",
        subcommands: [DemoCommand.self, BenchCommand.self, Sandbox.self, KafkaMock.self])
}

struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Run the whole pipeline on embedded parts (Kafka mock cluster, HTTPS push-proxy sandbox) and print the outcomes.")

    @Flag(help: "Show the worker's log lines.")
    var verbose = false

    func run() async throws {
        LogSetup.bootstrap(format: .text, level: verbose ? .info : .error)
        print(Demo.text(try await Demo.run(logger: Logger(label: "push-worker-demo"))))
    }
}
