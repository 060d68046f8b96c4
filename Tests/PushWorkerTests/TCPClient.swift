import Foundation
#if canImport(Glibc)
    import Glibc
#endif

/// A blocking TCP client socket for tests that need to see what the server does to a
/// connection (keep it, close it, refuse it), below any HTTP client library.
final class TCPClient {
    enum Received: Equatable {
        case bytes(String)
        /// The server closed the connection (end of stream or reset).
        case closed
        /// Nothing arrived within the wait; the connection is still open.
        case nothing
    }

    struct ConnectFailed: Error, Equatable { let errno: Int32 }

    private let descriptor: Int32

    /// Connects to an IPv4 address literal. `slowReader` makes this client's socket take little from the server before
    /// the server's writes block while it does not read: a small receive buffer, and a small segment size, which keeps
    /// the server's send buffer from growing (on loopback it otherwise takes megabytes).
    init(host: String, port: Int, slowReader: Bool = false) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        if slowReader {
            var receiveBuffer: Int32 = 4096
            setsockopt(descriptor, SOL_SOCKET, SO_RCVBUF, &receiveBuffer, socklen_t(MemoryLayout<Int32>.size))
            var segmentSize: Int32 = 536
            setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_MAXSEG, &segmentSize, socklen_t(MemoryLayout<Int32>.size))
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        inet_pton(AF_INET, host, &address.sin_addr)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        if result != 0 {
            let error = errno
            close(descriptor)
            throw ConnectFailed(errno: error)
        }
    }

    deinit { close(descriptor) }

    func send(_ text: String) {
        _ = text.utf8CString.withUnsafeBufferPointer { Glibc.send(descriptor, $0.baseAddress, $0.count - 1, Int32(MSG_NOSIGNAL)) }
    }

    /// What arrives within `wait`.
    func receive(within wait: Duration) -> Received {
        var timeout = timeval(tv_sec: Int(wait.components.seconds), tv_usec: Int(wait.components.attoseconds / 1_000_000_000_000))
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var buffer = [UInt8](repeating: 0, count: 65_536)
        let count = recv(descriptor, &buffer, buffer.count, 0)
        if count > 0 { return .bytes(String(decoding: buffer.prefix(count), as: UTF8.self)) }
        if count == 0 || errno == ECONNRESET { return .closed }
        return .nothing
    }

    /// Whether the server closes or resets the connection within `wait`, seen without reading what it sent.
    func closes(within wait: Duration) -> Bool {
        let peerClosed: Int16 = 0x2000  // POLLRDHUP (Linux), which Glibc exports only under _GNU_SOURCE
        var watched = pollfd(fd: descriptor, events: peerClosed, revents: 0)
        let milliseconds = Int32(wait.components.seconds * 1000 + wait.components.attoseconds / 1_000_000_000_000_000)
        guard poll(&watched, 1, milliseconds) == 1 else { return false }
        return watched.revents & (peerClosed | Int16(POLLHUP) | Int16(POLLERR)) != 0
    }

    /// Reads until the server closes the connection or nothing arrives for `wait`; how many bytes came and whether the
    /// connection closed.
    func receiveAll(quietFor wait: Duration = .seconds(5)) -> (bytes: Int, closed: Bool) {
        var total = 0
        while true {
            var timeout = timeval(
                tv_sec: Int(wait.components.seconds), tv_usec: Int(wait.components.attoseconds / 1_000_000_000_000))
            setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var buffer = [UInt8](repeating: 0, count: 65_536)
            let count = recv(descriptor, &buffer, buffer.count, 0)
            if count > 0 {
                total += count
                continue
            }
            return (total, count == 0 || errno == ECONNRESET)
        }
    }

    /// Sends `GET path` on this connection, keeping it open, reads the whole response and
    /// returns its status line; nil if the connection closed or no full response came.
    func get(_ path: String, within wait: Duration = .seconds(5)) -> String? {
        send("GET \(path) HTTP/1.1\r\nHost: test\r\n\r\n")
        var response = ""
        while true {
            guard case .bytes(let more) = receive(within: wait) else { return nil }
            response += more
            guard let headerEnd = response.range(of: "\r\n\r\n") else { continue }
            let head = response[..<headerEnd.lowerBound].lowercased()
            let length =
                head.components(separatedBy: "\r\n").first { $0.hasPrefix("content-length:") }
                .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
            if response.utf8.count - response[..<headerEnd.upperBound].utf8.count >= length {
                return response.components(separatedBy: "\r\n").first
            }
        }
    }
}
