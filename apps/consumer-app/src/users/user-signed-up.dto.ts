import { IsInt, IsString, Max, Min } from 'class-validator';

/** com.example.UserSignedUp as JSON (EVENT_FORMAT=json): the Avro record's fields, `userId` an Avro int (32 bits). */
export class UserSignedUpDto {
  @IsInt()
  @Min(-2147483648)
  @Max(2147483647)
  userId!: number;

  @IsString()
  userEmail!: string;

  @IsString()
  timestamp!: string;
}
