import COpenSSL

public struct CryptoError: Error, Sendable, CustomStringConvertible {
    public let message: String

    public init(_ message: String) { self.message = message }

    /// `operation` plus the reason OpenSSL queued, clearing its error queue.
    static func openSSL(_ operation: String) -> CryptoError {
        var reasons: [String] = []
        while case let code = ERR_get_error(), code != 0 {
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            reasons.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        return CryptoError(reasons.isEmpty ? operation : "\(operation): \(reasons.joined(separator: "; "))")
    }

    public var description: String { message }
}

/// Reads a memory BIO's contents.
func drain(_ bio: OpaquePointer) -> String {
    var data: UnsafeMutablePointer<CChar>?
    let length = BIO_ctrl(bio, BIO_CTRL_INFO, 0, &data)
    guard let data, length > 0 else { return "" }
    return String(decoding: UnsafeRawBufferPointer(start: data, count: length), as: UTF8.self)
}
