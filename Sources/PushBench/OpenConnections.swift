import Foundation

/// TCP connections open to a port, as the kernel lists them (`/proc/net/tcp` and `/proc/net/tcp6`: proc(5)):
/// the client ends in state ESTABLISHED whose remote port is `port`. Counts every process of the network
/// namespace; in a bench run only the worker connects to its provider endpoint.
enum OpenConnections {
    static func established(toPort port: Int) -> Int {
        ["/proc/net/tcp", "/proc/net/tcp6"].reduce(0) { count, table in count + established(toPort: port, table: table) }
    }

    /// Each line after the header: `sl local_address rem_address st …`, addresses as `HEXIP:HEXPORT`, state `01` = ESTABLISHED.
    private static func established(toPort port: Int, table: String) -> Int {
        var count = 0
        for line in contents(of: table).split(separator: "\n").dropFirst() {
            // Not `maxSplits`: the leading spaces that right-align `sl` would use up the splits.
            let fields = line.split(separator: " ")
            guard fields.count >= 4, fields[3] == "01", let colon = fields[2].lastIndex(of: ":"),
                Int(fields[2][fields[2].index(after: colon)...], radix: 16) == port
            else { continue }
            count += 1
        }
        return count
    }

    /// The whole file, read until the end: the kernel hands out a proc table a page at a time, and its size is 0.
    private static func contents(of path: String) -> String {
        let descriptor = open(path, O_RDONLY)
        guard descriptor >= 0 else { return "" }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            guard count > 0 else { break }
            bytes.append(contentsOf: chunk[..<count])
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
