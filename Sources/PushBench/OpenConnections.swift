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
        guard let text = try? String(contentsOfFile: table, encoding: .utf8) else { return 0 }
        var count = 0
        for line in text.split(separator: "\n").dropFirst() {
            let fields = line.split(separator: " ", maxSplits: 4)
            guard fields.count >= 4, fields[3] == "01", let colon = fields[2].lastIndex(of: ":"),
                  Int(fields[2][fields[2].index(after: colon)...], radix: 16) == port else { continue }
            count += 1
        }
        return count
    }
}
