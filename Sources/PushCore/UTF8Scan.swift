extension String {
    /// Whether any byte of the string's UTF-8 matches, read from its contiguous storage when it has one
    /// (native strings do): job fields, request fields and header names pass here on every request.
    @inlinable
    public func containsUTF8Byte(where matches: (UInt8) -> Bool) -> Bool {
        utf8.withContiguousStorageIfAvailable { $0.contains(where: matches) } ?? utf8.contains(where: matches)
    }
}
