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

    /// Connects to an IPv4 address literal.
    init(host: String, port: Int) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
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
