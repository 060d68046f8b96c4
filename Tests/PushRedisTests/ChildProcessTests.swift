import Foundation
import Testing
@testable import PushSandbox

@Suite("Child processes of the sandboxes (redis-server, redis-cli)")
struct ChildProcessTests {
    @Test("a child inherits standard input, output and error only, never the parent's other descriptors")
    func inheritsNoOtherDescriptor() async throws {
        var pipeEnds: [Int32] = [0, 0]
        #expect(pipe(&pipeEnds) == 0)
        defer { pipeEnds.forEach { close($0) } }
        let output = try temporaryFile()
        defer { try? FileManager.default.removeItem(atPath: output) }
        let child = try ChildProcess(executable: "/bin/sh", arguments: ["-c", "ls /proc/$$/fd"], standardOutput: .file(output))
        #expect(await child.exitStatus() == 0)
        let descriptors = try String(contentsOfFile: output, encoding: .utf8).split(whereSeparator: \.isWhitespace).compactMap { Int32($0) }
        #expect(descriptors.sorted() == [0, 1, 2], "the parent's pipe \(pipeEnds) is open here")
    }

    @Test("the exit status is the child's exit code, or 128 + the signal that ended it")
    func exitStatus() async throws {
        #expect(try await ChildProcess(executable: "/bin/sh", arguments: ["-c", "exit 7"]).exitStatus() == 7)
        let sleeper = try ChildProcess(executable: "/bin/sleep", arguments: ["30"])
        sleeper.kill()
        #expect(await sleeper.exitStatus() == 128 + SIGKILL)
    }

    @Test("standard error can follow standard output into one file; standard input reads a file")
    func streams() async throws {
        let input = try temporaryFile(), output = try temporaryFile()
        defer { for file in [input, output] { try? FileManager.default.removeItem(atPath: file) } }
        try Data("from the file\n".utf8).write(to: URL(fileURLWithPath: input))
        let child = try ChildProcess(
            executable: "/bin/sh", arguments: ["-c", "cat; echo to-error >&2"],
            standardInput: .file(input), standardOutput: .file(output), standardError: .standardOutput)
        #expect(await child.exitStatus() == 0)
        #expect(try String(contentsOfFile: output, encoding: .utf8) == "from the file\nto-error\n")
    }

    @Test("a program that does not exist is an error at start, not a child")
    func missingProgram() {
        #expect(throws: (any Error).self) { try ChildProcess(executable: "/nonexistent/program", arguments: []) }
    }

    private func temporaryFile() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("child-process-\(UUID().uuidString)").path
        #expect(FileManager.default.createFile(atPath: path, contents: nil))
        return path
    }
}
