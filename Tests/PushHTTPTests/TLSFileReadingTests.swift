import Foundation
import PushCrypto
import PushSandbox
import Testing
import TestSupport
@testable import PushHTTP

/// The HTTP/2 client opens connections from `TLSOptions`, with the worker's framing and with the oracle's.
enum TLSClient: String, CaseIterable, Sendable {
    case nghttp2, nioHTTP2

    func make() -> any HTTPTransport {
        switch self {
        case .nghttp2: NIOHTTP2Transport(framing: .nghttp2)
        case .nioHTTP2: NIOHTTP2Transport(framing: .nio)
        }
    }
}

@Suite("TLS files are read once, with the options that name them, and connections use those bytes")
struct TLSFileReadingTests {
    /// Cuts the file at `path` to its first half, as a copy caught in the middle of being written leaves it.
    static func halfWrite(_ path: String) throws {
        let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        try bytes.prefix(bytes.count / 2).write(to: URL(fileURLWithPath: path))
    }

    @Test(
        "a CA file, client certificate and key half-written after the options were made do not reach a new connection: it handshakes with the bytes read",
        arguments: TLSClient.allCases)
    func replacedFilesDoNotReachNewConnections(_ client: TLSClient) async throws {
        let tls = try SandboxTLS.make()
        defer { tls.remove() }
        let server = try await SandboxServer.start(tls: tls, requireClientCertificate: true) { _ in SandboxResponse(status: 200) }
        let options = TLSOptions(caFile: tls.caFile, clientCertificateFile: tls.clientCertificateFile, clientKeyFile: tls.clientKeyFile)
        for path in [tls.caFile, tls.clientCertificateFile, tls.clientKeyFile] { try Self.halfWrite(path) }
        let transport = client.make()
        defer { transport.shutdown() }

        #expect(try await transport.send(HTTPRequest(url: server.baseURL + "/loaded", tls: options)).status == 200)
        let readNow = TLSOptions(caFile: tls.caFile, clientCertificateFile: tls.clientCertificateFile, clientKeyFile: tls.clientKeyFile)
        await #expect(throws: HTTPTransportError.self, "options read after the files broke cannot make a context") {
            try await transport.send(HTTPRequest(url: server.baseURL + "/half-written", tls: readNow))
        }
        await server.stop()
    }

    @Test(
        "on the HTTP/1.1 fallback (libcurl) too, CA, certificate and key files half-written after the options were made do not reach a new connection"
    )
    func replacedFilesDoNotReachTheFallback() async throws {
        let tls = try SandboxTLS.make()
        defer { tls.remove() }
        let server = try await HTTP1Server.start(tls: tls, requireClientCertificate: true)
        let url = "https://localhost:\(server.port)"
        let options = TLSOptions(caFile: tls.caFile, clientCertificateFile: tls.clientCertificateFile, clientKeyFile: tls.clientKeyFile)
        for path in [tls.caFile, tls.clientCertificateFile, tls.clientKeyFile] { try Self.halfWrite(path) }
        let transport = NIOHTTP2Transport()
        defer { transport.shutdown() }

        #expect(try await transport.send(HTTPRequest(url: url + "/loaded", tls: options)).status == 202)
        #expect(server.counter.count == 1)
        let readNow = TLSOptions(caFile: tls.caFile, clientCertificateFile: tls.clientCertificateFile, clientKeyFile: tls.clientKeyFile)
        await #expect(throws: HTTPTransportError.self, "options read after the files broke cannot make a connection") {
            try await transport.send(HTTPRequest(url: url + "/half-written", tls: readNow))
        }
        #expect(server.counter.count == 1)
        try await server.channel.close()
        try await server.group.shutdownGracefully()
    }

    @Test("options read from one path with other bytes get a pool and a TLS context of their own; with the same bytes they share one")
    func poolsAreKeyedByTheBytesRead() async throws {
        let tls = try SandboxTLS.make()
        defer { tls.remove() }
        let server = try await SandboxServer.start(tls: tls) { _ in SandboxResponse(status: 200) }
        let transport = NIOHTTP2Transport()
        defer { transport.shutdown() }
        let first = TLSOptions(caFile: tls.caFile)
        let sameBytes = TLSOptions(caFile: tls.caFile)
        // The same CA with a comment line before it: still a valid bundle, other bytes.
        try ("# rotated\n" + tls.caCertificatePEM).write(toFile: tls.caFile, atomically: true, encoding: .utf8)
        let otherBytes = TLSOptions(caFile: tls.caFile)
        #expect(first == sameBytes)
        #expect(first != otherBytes)
        #expect(otherBytes.caFile?.sha256 == Digest.sha256(Array(("# rotated\n" + tls.caCertificatePEM).utf8)))

        for (path, options) in [("/first", first), ("/same", sameBytes), ("/other", otherBytes)] {
            #expect(try await transport.send(HTTPRequest(url: server.baseURL + path, tls: options)).status == 200)
        }
        #expect(await transport.poolCount == 2)
        #expect(transport.tlsContextBuilds == 2)
        await server.stop()
    }

    @Test("a FIFO named as a CA file, client certificate or key is refused as not a regular file, without waiting for a writer")
    func fifoIsRefused() async throws {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let fifo = scratch.url.appendingPathComponent("ca.pem").path
        try makeFIFO(at: fifo)
        let refusal = "\(fifo) is a FIFO, not a regular file: refused"

        let file = await withFIFOWatchdog(unblocking: fifo) { CredentialFile(reading: fifo) }
        #expect(file.problem == .notRegularFile(path: fifo, kind: "a FIFO"))
        #expect(file.problem.map { "\($0)" } == refusal)
        for options in [
            TLSOptions(caFile: fifo), TLSOptions(clientCertificateFile: fifo),
            TLSOptions(clientCertificateFile: fifo, clientCertificateFormat: .pkcs12),
        ] {
            #expect(options.problem == refusal)
        }

        // The request fails on the file, unsent, instead of a connection that waits on the FIFO.
        let transport = NIOHTTP2Transport()
        let error = await withFIFOWatchdog(unblocking: fifo) { () async -> HTTPTransportError? in
            defer { transport.shutdown() }
            do throws(HTTPTransportError) {
                _ = try await transport.send(HTTPRequest(url: "https://localhost:9/x", tls: TLSOptions(caFile: fifo)))
                return nil
            } catch {
                return error
            }
        }
        #expect(error == .tls(refusal))
    }

    @Test("a TLS file over 1 MiB is refused as too large; one of exactly 1 MiB is read")
    func sizeIsCapped() throws {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let large = scratch.url.appendingPathComponent("large.pem").path
        try Data(repeating: 0x41, count: CredentialFile.maximumBytes + 1).write(to: URL(fileURLWithPath: large))
        let limit = scratch.url.appendingPathComponent("limit.pem").path
        try Data(repeating: 0x41, count: CredentialFile.maximumBytes).write(to: URL(fileURLWithPath: limit))

        let refused = CredentialFile(reading: large)
        #expect(refused.problem == .tooLarge(path: large, limit: CredentialFile.maximumBytes))
        #expect(refused.problem.map { "\($0)" } == "\(large) is larger than 1024 KiB: refused")
        #expect(TLSOptions(caFile: large).problem == "\(large) is larger than 1024 KiB: refused")
        #expect(try CredentialFile(reading: limit).bytes().count == CredentialFile.maximumBytes)
    }

    @Test("a device, a directory or a missing path is refused when it is read, each with its own reason")
    func specialFilesAreRefused() throws {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let missing = scratch.url.appendingPathComponent("missing.pem").path
        #expect(CredentialFile(reading: "/dev/zero").problem == .notRegularFile(path: "/dev/zero", kind: "a character device"))
        #expect(CredentialFile(reading: scratch.path).problem == .notRegularFile(path: scratch.path, kind: "a directory"))
        #expect(CredentialFile(reading: missing).problem.map { "\($0)" } == "\(missing) does not exist or is not readable")
    }

    @Test("options whose files do not parse, or whose key does not match the certificate, say why no TLS context can be made of them")
    func unparsableOptionsSayWhy() throws {
        let tls = try SandboxTLS.make()
        defer { tls.remove() }
        let other = try SandboxTLS.make()
        defer { other.remove() }
        #expect(TLSOptions(caFile: tls.caFile).problem == nil)
        #expect(TLSOptions(clientCertificateFile: tls.clientCertificateFile, clientKeyFile: tls.clientKeyFile).problem == nil)
        let mismatched = TLSOptions(clientCertificateFile: tls.clientCertificateFile, clientKeyFile: other.clientKeyFile)
        #expect(
            mismatched.problem?.hasPrefix("\(tls.clientCertificateFile), \(other.clientKeyFile) cannot make a TLS client context") == true)
        try Self.halfWrite(tls.caFile)
        #expect(TLSOptions(caFile: tls.caFile).problem?.hasPrefix("\(tls.caFile) cannot make a TLS client context") == true)
    }
}
