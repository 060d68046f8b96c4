import COpenSSL

public enum Digest {
    public static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: 32) { output, count in
            push_sha256(bytes, bytes.count, output.baseAddress)
            count = 32
        }
    }

    /// `body` given the SHA-256 of `bytes` in a buffer on the stack: no array for a digest read once.
    public static func withSHA256<Result>(_ bytes: [UInt8], _ body: (UnsafeBufferPointer<UInt8>) -> Result) -> Result {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 32) { output in
            push_sha256(bytes, bytes.count, output.baseAddress)
            return body(UnsafeBufferPointer(output))
        }
    }

    public static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            output.append(digits[Int(byte >> 4)])
            output.append(digits[Int(byte & 15)])
        }
        return String(decoding: output, as: UTF8.self)
    }
}
