// A reproducible tar writer for image layers: the same entries give the same bytes on any machine.
//
// Every entry has a fixed mtime (0), numeric owner and group (names empty, so no host account leaks in) and the
// mode it is given; nothing is read from the host but file contents. The format is POSIX ustar; a path or link
// target that does not fit its fields gets a PAX extended header ("x") in front, as GNU tar --format=posix does.
// What GNU tar gives with `--sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner`, without depending on
// which tar the build machine has.

import { ImageBuildError } from "./image-build-error.ts";

export const TAR_BLOCK = 512;

export type TarEntry =
  | { type: "file"; path: string; content: Buffer; mode: number; uid?: number; gid?: number }
  | { type: "dir"; path: string; mode: number; uid?: number; gid?: number }
  | { type: "symlink"; path: string; target: string; uid?: number; gid?: number };

const TYPEFLAG = { file: "0", symlink: "2", dir: "5", pax: "x" } as const;

/** The archive as a list of chunks (file contents are not copied), ending with the two zero blocks. */
export function tarChunks(entries: readonly TarEntry[]): Buffer[] {
  const chunks: Buffer[] = [];
  for (const entry of entries) {
    // Folders end in "/" in tar, which is how extractors tell them from files when the typeflag is lost.
    const name = entry.type === "dir" && !entry.path.endsWith("/") ? `${entry.path}/` : entry.path;
    if (name.startsWith("/") || name.split("/").includes(".."))
      throw new ImageBuildError("input", `tar entry path must be relative and stay inside: ${entry.path}`);
    const content = entry.type === "file" ? entry.content : Buffer.alloc(0);
    const linkname = entry.type === "symlink" ? entry.target : "";
    const mode = entry.type === "symlink" ? 0o777 : entry.mode;
    const pax: Record<string, string> = {};
    if (Buffer.byteLength(name) > 100) pax.path = name;
    if (Buffer.byteLength(linkname) > 100) pax.linkpath = linkname;
    if (content.length > 0o77777777777) throw new ImageBuildError("input", `tar entry larger than 8 GiB: ${entry.path}`);
    if (Object.keys(pax).length > 0) {
      const records = paxRecords(pax);
      chunks.push(header({ name: paxHeaderName(name), size: records.length, mode: 0o644, typeflag: TYPEFLAG.pax, linkname: "", uid: 0, gid: 0 }));
      chunks.push(records, padding(records.length));
    }
    chunks.push(
      header({
        name: pax.path ? truncateUtf8(name, 100) : name,
        size: content.length,
        mode,
        typeflag: TYPEFLAG[entry.type],
        linkname: pax.linkpath ? truncateUtf8(linkname, 100) : linkname,
        uid: entry.uid ?? 0,
        gid: entry.gid ?? 0,
      }),
    );
    if (content.length > 0) chunks.push(content, padding(content.length));
  }
  chunks.push(Buffer.alloc(2 * TAR_BLOCK, 0));
  return chunks;
}

/** PAX records: "LEN key=value\n", where LEN counts the whole record including its own digits. */
function paxRecords(fields: Record<string, string>): Buffer {
  const records = Object.entries(fields).map(([key, value]) => {
    const body = ` ${key}=${value}\n`;
    let length = Buffer.byteLength(body);
    while (String(length).length + Buffer.byteLength(body) !== length) length = String(length).length + Buffer.byteLength(body);
    return `${length}${body}`;
  });
  return Buffer.from(records.join(""), "utf8");
}

/** Where GNU tar puts a PAX header by default: the entry's folder, PaxHeaders, its base name (cut to fit). */
function paxHeaderName(name: string): string {
  const trimmed = name.endsWith("/") ? name.slice(0, -1) : name;
  const slash = trimmed.lastIndexOf("/");
  const dir = slash >= 0 ? trimmed.slice(0, slash) : ".";
  const base = slash >= 0 ? trimmed.slice(slash + 1) : trimmed;
  return truncateUtf8(`${truncateUtf8(dir, 60)}/PaxHeaders/${base}`, 100);
}

function truncateUtf8(text: string, bytes: number): string {
  const buffer = Buffer.from(text, "utf8");
  if (buffer.length <= bytes) return text;
  // Cutting inside a multi-byte character leaves a replacement character; trim until it round-trips.
  let end = bytes;
  while (end > 0 && Buffer.byteLength(buffer.subarray(0, end).toString("utf8")) > bytes) end--;
  return buffer
    .subarray(0, end)
    .toString("utf8")
    .replace(/\uFFFD$/, "");
}

function padding(length: number): Buffer {
  return Buffer.alloc((TAR_BLOCK - (length % TAR_BLOCK)) % TAR_BLOCK, 0);
}

function header(h: { name: string; size: number; mode: number; typeflag: string; linkname: string; uid: number; gid: number }): Buffer {
  const block = Buffer.alloc(TAR_BLOCK, 0);
  const field = (offset: number, length: number, text: string) => block.write(text, offset, length, "utf8");
  /** An octal number, zero-padded to length-1 digits, NUL-terminated. */
  const octal = (offset: number, length: number, value: number) => field(offset, length, value.toString(8).padStart(length - 1, "0") + "\0");
  field(0, 100, h.name);
  octal(100, 8, h.mode);
  octal(108, 8, h.uid);
  octal(116, 8, h.gid);
  octal(124, 12, h.size);
  octal(136, 12, 0); // mtime: the epoch, for every entry
  field(148, 8, " ".repeat(8)); // the checksum is computed with its own field as spaces
  field(156, 1, h.typeflag);
  field(157, 100, h.linkname);
  field(257, 6, "ustar\0");
  field(263, 2, "00");
  // uname and gname stay empty: numeric ids only.
  let checksum = 0;
  for (const byte of block) checksum += byte;
  field(148, 8, checksum.toString(8).padStart(6, "0") + "\0 ");
  return block;
}
