# SPDX-License-Identifier: MIT
# Debian's linux-source-6.1, for the set-up scripts (sourced by deps.sh and
# build-debug-kernel.sh, after progress.sh).

# linux_source_extract DEST [PATH...]: download the package and extract
# PATHs of the kernel tree (the whole tree when none) into DEST, emptied
# first. The tarball inside is large: one pass over it.
linux_source_extract() {
	local dest=$1 tmp rc=0
	shift
	tmp=$(mktemp -d)
	(cd "$tmp" && progress_run "downloading linux-source-6.1 (140 MB)" download.log \
		apt-get download -q linux-source-6.1) || rc=$?
	if [ "$rc" = 0 ]; then
		rm -rf "$dest" && mkdir -p "$dest"
		progress_run "extracting linux-source-6.1" "$tmp/extract.log" \
			linux_source_untar "$tmp" "$dest" "$@" || rc=$?
	fi
	rm -rf "$tmp"
	return "$rc"
}

linux_source_untar() {	# linux_source_untar DOWNLOAD_DIR DEST [PATH...]
	local deb_dir=$1 dest=$2
	shift 2
	dpkg-deb --fsys-tarfile "$deb_dir"/linux-source-6.1_*.deb |
		tar -xO ./usr/src/linux-source-6.1.tar.xz | xz -dc |
		tar -x -C "$dest" --strip-components=1 "${@/#/linux-source-6.1/}"
}
