package vmlab

import "os"

// LocalDiskMarker is what the boot sector of LocalDiskImage prints on
// the first serial port: the proof that a "boot from local disk" reached
// the disk.
const LocalDiskMarker = "ANVIL-LOCALDISK"

// localDiskCode is a real-mode MBR boot sector program: it writes the
// NUL-terminated message that follows it to COM1 (port 0x3f8) and halts.
var localDiskCode = []byte{
	0xfc,       // cld
	0x31, 0xc0, // xor ax, ax
	0x8e, 0xd8, // mov ds, ax
	0xba, 0xf8, 0x03, // mov dx, 0x3f8
	0xbe, 0x16, 0x7c, // mov si, 0x7c16 (the message, right after this code)
	0xac,       // next: lodsb
	0x84, 0xc0, // test al, al
	0x74, 0x03, // jz halt
	0xee,       // out dx, al
	0xeb, 0xf8, // jmp next
	0xf4,       // halt: hlt
	0xeb, 0xfd, // jmp halt
}

// localDiskMessage is what the boot sector prints: the marker three
// times, each on a line of its own. The firmware's last characters may
// still be reaching the console when the boot sector starts writing to
// the UART, and a CI run saw them land inside the first copy
// ("Booting from SAN device 0x8AN0" then "VIL-LOCALDISK"); a later copy
// is whole.
const localDiskMessage = "\r\n" + LocalDiskMarker + "\r\n" + LocalDiskMarker + "\r\n" + LocalDiskMarker + "\r\n\x00"

// LocalDiskImage writes to path a 1 MiB raw disk whose MBR boot sector
// prints LocalDiskMarker on COM1 and halts (Scenario.Disk).
func LocalDiskImage(path string) error {
	disk := make([]byte, 1<<20)
	n := copy(disk, localDiskCode)
	copy(disk[n:], localDiskMessage)
	disk[510], disk[511] = 0x55, 0xaa
	return os.WriteFile(path, disk, 0o644)
}
